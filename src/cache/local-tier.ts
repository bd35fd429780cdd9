import { entrySize, isFresh, type CacheEntry } from './cache-entry.ts'
import type { LRUCache } from 'lru-cache'
import { boundedLru, setUntil } from './bounded-lru.ts'
import { MemoryStore } from './memory-store.ts'
import type { BusEvent, RedisBus } from '../redis/bus.ts'
import type { CacheStore, PurgeMark } from './store.ts'

export interface LocalTierOptions {
  /** The shared store behind this tier. */
  shared: CacheStore
  /** `ready`: Redis is up and its events reach this instance, so the shared store may be used. */
  events: Pick<RedisBus, 'ready' | 'listen'>
  /** How long a copy of a shared entry is held here at most (it also leaves when it stops being fresh). */
  ttlMs?: number
  maxEntries?: number
  maxBytes?: number
  /** While Redis is away: how many entries, and bytes, this instance keeps on its own (default: the embedded store's). */
  alone?: { maxEntries: number, maxBytes: number }
  purgeMemoryMs: number
  now?: () => number
}

/**
 * Copies last a few seconds at most (a missed event, in a gap the reconnection did not notice, cannot
 * last longer), and are few, since they only hold what is hot.
 */
const COPY_TTL_MS = 2_000
const COPY_MAX_ENTRIES = 1_000
const COPY_MAX_BYTES = 16 * 1024 * 1024

/** Entries handed to Redis at once when it is back. */
const REJOIN_BATCH = 100

/**
 * The in-process side of the shared cache. While Redis is up it holds small, short-lived copies of
 * fresh shared entries, so that a hit costs no Redis round trip; they stay coherent through the bus:
 * another instance's fill or purge of a key drops the copy here. While Redis is down or its events
 * are lost it is the cache: a store of its own serves and fills entries for their whole life, so the
 * upstream stays sheltered. When Redis is back, what was filled alone is handed to Redis (set-if-newer)
 * before reads go there again, so that no hot key turns into an upstream call.
 */
export class LocalTier implements CacheStore {
  readonly #options: LocalTierOptions
  readonly #copies: LRUCache<string, CacheEntry>
  readonly #copyTtlMs: number
  readonly #alone: MemoryStore
  readonly #now: () => number
  #rejoining: Promise<void> | undefined
  /**
   * Counts the other instances' fills and purges, and this instance's purges: a shared read or write
   * that overlapped one may hold what it just replaced, so it is not copied here.
   */
  #generation = 0
  /**
   * Shared reads in flight, by key. Every copy here expires after `ttlMs`, and a hot key's requests
   * arrive together: without this, each of them would read Redis until the first read is back.
   */
  readonly #reading = new Map<string, Promise<CacheEntry | undefined>>()

  constructor (options: LocalTierOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#copies = boundedLru({ maxEntries: options.maxEntries ?? COPY_MAX_ENTRIES, maxBytes: options.maxBytes ?? COPY_MAX_BYTES, sizeOf: entrySize, now: this.#now })
    this.#copyTtlMs = options.ttlMs ?? COPY_TTL_MS
    this.#alone = new MemoryStore({ ...options.alone, purgeMemoryMs: options.purgeMemoryMs, now: this.#now })
    options.events.listen({
      onEvent: (event) => this.#onEvent(event),
      onLost: () => { this.#adoptCopies().catch(() => {}) }
    })
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    if (!this.#sharing()) return await this.#alone.get(key)
    const local = this.#copies.get(key)
    if (local !== undefined) return local
    let reading = this.#reading.get(key)
    if (reading === undefined) {
      const read = this.#readShared(key)
      reading = read
      this.#reading.set(key, read)
      const done = (): void => { if (this.#reading.get(key) === read) this.#reading.delete(key) }
      read.then(done, done)
    }
    try {
      return await reading
    } catch (error) {
      // Redis failed meanwhile (and is now marked down): what a load filled here since then still counts.
      if (this.#sharing()) throw error
      return await this.#alone.get(key)
    }
  }

  /** The copy held here (the whole entry while Redis is away); undefined sends the caller to `get`. */
  peek (key: string): CacheEntry | undefined {
    return this.#sharing() ? this.#copies.get(key) : this.#alone.peek(key)
  }

  /** A read of its own, past the copies and the shared reads, which may predate a lock or an event. */
  async getLatest (key: string): Promise<CacheEntry | undefined> {
    return this.#sharing() ? await this.#readShared(key) : await this.#alone.get(key)
  }

  /**
   * The mark of the store a fill would go to now. Should the load end on the other side of an outage's
   * edge, that store takes it for no mark: stale if it remembers a purge, one revalidation at most.
   */
  async purgeMark (key: string): Promise<PurgeMark> {
    if (!this.#sharing()) return await this.#alone.purgeMark(key)
    try {
      return await this.#options.shared.purgeMark(key)
    } catch (error) {
      // Redis failed meanwhile (and is now marked down): the fill will be stored here.
      if (this.#sharing()) throw error
      return await this.#alone.purgeMark(key)
    }
  }

  async set (key: string, entry: CacheEntry, mark?: PurgeMark): Promise<CacheEntry | undefined> {
    if (!this.#sharing()) return await this.#alone.set(key, entry, mark)
    const generation = this.#generation
    let stored: CacheEntry | undefined
    try {
      stored = await this.#options.shared.set(key, entry, mark)
    } catch {
      // Redis failed meanwhile (and is now marked down): the load still shelters the upstream from here.
      return await this.#alone.set(key, entry, mark)
    }
    // A read that started before this write may answer what it replaced.
    this.#reading.delete(key)
    if (stored !== undefined) this.#keep(key, stored, generation)
    return stored
  }

  /** Here at once; in Redis too, which rejects while it is down (the purge then did not reach the other instances). */
  async markStale (keys: readonly string[], now: number): Promise<number> {
    // A read or write under way (a revalidation's) may answer the entry before the purge: not copied here.
    this.#changed(keys)
    try {
      const alone = await this.#alone.markStale(keys, now)
      return Math.max(alone, await this.#options.shared.markStale(keys, now))
    } finally {
      // Nor one that started while the purge was on its way to Redis, which it may have preceded there.
      this.#changed(keys)
    }
  }

  async close (): Promise<void> {
    this.#copies.clear()
    this.#alone.clear()
    await this.#options.shared.close()
  }

  /** Whether Redis serves reads now; when it is back after an outage, once the entries filled alone are handed over. */
  #sharing (): boolean {
    if (!this.#options.events.ready) return false
    if (this.#alone.size === 0) return true
    this.#rejoining ??= this.#rejoin().finally(() => { this.#rejoining = undefined })
    return false
  }

  async #rejoin (): Promise<void> {
    const entries = [...this.#alone.entries()]
    try {
      for (let i = 0; i < entries.length; i += REJOIN_BATCH) {
        await Promise.all(entries.slice(i, i + REJOIN_BATCH).map(async ([key, entry]) => await this.#options.shared.set(key, entry)))
      }
    } catch {
      // Redis failed again: this instance stays on its own, and hands over when it is back.
      return
    }
    this.#copies.clear()
    this.#alone.clear()
  }

  /**
   * Events may be missed from now on, so the copies stop being copies: they are kept alone, for their
   * whole life, rather than loaded again (a purge elsewhere could not reach this instance anyway).
   */
  async #adoptCopies (): Promise<void> {
    const copies = [...this.#copies.entries()]
    this.#copies.clear()
    for (const [key, copy] of copies) await this.#alone.set(key, copy)
  }

  async #readShared (key: string): Promise<CacheEntry | undefined> {
    const generation = this.#generation
    const entry = await this.#options.shared.get(key)
    if (entry !== undefined) this.#keep(key, entry, generation)
    return entry
  }

  /** The keys changed here: their copies go, and no read or write under way copies anything. */
  #changed (keys: readonly string[]): void {
    this.#generation++
    for (const key of keys) this.#forget(key)
  }

  /** Drops the copy, and lets a read after this point start its own rather than join an older one. */
  #forget (key: string): void {
    this.#copies.delete(key)
    this.#reading.delete(key)
  }

  /** Copies an entry here unless another instance changed some entry while it was read or written. */
  #keep (key: string, entry: CacheEntry, generation: number): void {
    const now = this.#now()
    if (generation !== this.#generation || !this.#options.events.ready || !isFresh(entry, now)) return
    setUntil(this.#copies, key, entry, Math.min(now + this.#copyTtlMs, entry.freshUntil))
  }

  #onEvent (event: BusEvent): void {
    if (event.type === 'released') return
    this.#generation++
    if (event.type === 'filled' && this.#copies.peek(event.key)?.etag === event.etag) return
    this.#forget(event.key)
  }
}
