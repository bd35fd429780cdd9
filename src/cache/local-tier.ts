import { entrySize, isFresh, type CacheEntry } from './cache-entry.js'
import { BoundedMap } from './bounded-map.js'
import type { CacheEvent, RedisEvents } from './redis-events.js'
import type { CacheStore } from './store.js'

export interface LocalTierOptions {
  /** The shared store behind this tier. */
  shared: CacheStore
  events: Pick<RedisEvents, 'ready' | 'listen'>
  /** How long an entry is held here at most (it also leaves when it stops being fresh). */
  ttlMs: number
  maxEntries: number
  maxBytes: number
  now?: () => number
}

/**
 * A small, short-lived copy of fresh shared entries in this process, so that a hit costs no Redis round
 * trip. It stays coherent through the events channel: another instance's fill or purge of a key drops
 * the copy here. While the channel is down it is neither read nor filled (an event could be missed),
 * and it starts empty when the channel comes back.
 */
export class LocalTier implements CacheStore {
  readonly #options: LocalTierOptions
  readonly #entries: BoundedMap<CacheEntry>
  readonly #now: () => number
  /**
   * Counts the other instances' fills and purges: a shared read or write that overlapped one may hold
   * what the event just replaced, so it is not copied here.
   */
  #generation = 0
  /**
   * Shared reads in flight, by key. Every copy here expires after `ttlMs`, and a hot key's requests
   * arrive together: without this, each of them would read Redis until the first read is back.
   */
  readonly #reading = new Map<string, Promise<CacheEntry | undefined>>()

  constructor (options: LocalTierOptions) {
    this.#options = options
    this.#entries = new BoundedMap({ maxEntries: options.maxEntries, maxBytes: options.maxBytes, sizeOf: entrySize })
    this.#now = options.now ?? Date.now
    options.events.listen({
      onEvent: (event) => this.#onEvent(event),
      onLost: () => this.#entries.clear()
    })
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    if (!this.#options.events.ready) return await this.#options.shared.get(key)
    const local = this.#entries.get(key, this.#now())
    if (local !== undefined) return local
    let reading = this.#reading.get(key)
    if (reading === undefined) {
      const read = this.#readShared(key)
      reading = read
      this.#reading.set(key, read)
      const done = (): void => { if (this.#reading.get(key) === read) this.#reading.delete(key) }
      read.then(done, done)
    }
    return await reading
  }

  /** A read of its own, past the copies and the shared reads, which may predate a lock or an event. */
  async getLatest (key: string): Promise<CacheEntry | undefined> {
    return this.#options.events.ready ? await this.#readShared(key) : await this.#options.shared.get(key)
  }

  async set (key: string, entry: CacheEntry): Promise<boolean> {
    const generation = this.#generation
    const stored = await this.#options.shared.set(key, entry)
    // A read that started before this write may answer what it replaced.
    this.#reading.delete(key)
    if (stored) this.#keep(key, entry, generation)
    return stored
  }

  async markStale (keys: readonly string[], now: number): Promise<number> {
    for (const key of keys) this.#forget(key)
    return await this.#options.shared.markStale(keys, now)
  }

  async close (): Promise<void> {
    this.#entries.clear()
    await this.#options.shared.close()
  }

  async #readShared (key: string): Promise<CacheEntry | undefined> {
    const generation = this.#generation
    const entry = await this.#options.shared.get(key)
    if (entry !== undefined) this.#keep(key, entry, generation)
    return entry
  }

  /** Drops the copy, and lets a read after this point start its own rather than join an older one. */
  #forget (key: string): void {
    this.#entries.delete(key)
    this.#reading.delete(key)
  }

  /** Copies an entry here unless another instance changed some entry while it was read or written. */
  #keep (key: string, entry: CacheEntry, generation: number): void {
    const now = this.#now()
    if (generation !== this.#generation || !this.#options.events.ready || !isFresh(entry, now)) return
    this.#entries.set(key, entry, Math.min(now + this.#options.ttlMs, entry.freshUntil))
  }

  #onEvent (event: CacheEvent): void {
    if (event.type === 'released') return
    this.#generation++
    if (event.type === 'filled' && this.#entries.peek(event.key)?.etag === event.etag) return
    this.#forget(event.key)
  }
}
