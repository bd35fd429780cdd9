import type { CacheEntry } from './cache-entry.ts'
import type { CacheDriver, PurgeMark, Tier } from './driver.ts'
import type { MemoryDriver } from './memory-driver.ts'
import type { NearCopies } from './near-copies.ts'
import type { BusEvent, RedisBus } from '../redis/bus.ts'

export interface SharedTierOptions {
  /** Redis. */
  driver: CacheDriver
  /** `ready`: Redis is up and the other instances' events reach this one, so Redis may be used. */
  bus: Pick<RedisBus, 'ready' | 'listen' | 'publish'>
  /** Copies of hot shared entries, kept coherent by the bus. */
  copies: NearCopies
  /** What this instance holds that Redis may lack: its fills while Redis was away, or refused them. */
  alone: MemoryDriver
  /** A write or an event that could not reach Redis (the instance goes on with what it holds). */
  onError: (error: unknown, key: string) => void
}

/** Entries handed to Redis at once when it is back. */
const HAND_BACK_BATCH = 100

/**
 * Redis with this instance in front of it. While Redis is up, hits are answered from short copies, shared
 * reads of one key are made once however many requests want it, and fills and purges are told to the other
 * instances. While Redis is down or its events are lost, this instance's own store is the cache, for each
 * entry's whole life, so the upstream stays sheltered. What it holds alone is read before Redis, and handed
 * to Redis (set-if-newer) as soon as Redis takes writes again, so that no hot key turns into an upstream call.
 */
export class SharedTier implements Tier {
  readonly #driver: CacheDriver
  readonly #bus: SharedTierOptions['bus']
  readonly #copies: NearCopies
  readonly #alone: MemoryDriver
  readonly #onError: SharedTierOptions['onError']
  /** Shared reads in flight: a hot key's requests arrive together when its copy expires. */
  readonly #reading = new Map<string, Promise<CacheEntry | undefined>>()
  #handingBack = false

  constructor (options: SharedTierOptions) {
    this.#driver = options.driver
    this.#bus = options.bus
    this.#copies = options.copies
    this.#alone = options.alone
    this.#onError = options.onError
    options.bus.listen({
      onEvent: (event) => { this.#hear(event) },
      onLost: () => { this.#adoptCopies() },
      onReady: () => { this.#handBack() }
    })
  }

  held (key: string): CacheEntry | undefined {
    if (!this.#bus.ready) return this.#alone.held(key)
    return this.#copies.get(key) ?? this.#heldAlone(key)
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    const held = this.held(key)
    if (held !== undefined || !this.#bus.ready) return held
    let reading = this.#reading.get(key)
    if (reading === undefined) {
      const read = this.#readShared(key)
      reading = read
      this.#reading.set(key, read)
      const done = (): void => { if (this.#reading.get(key) === read) this.#reading.delete(key) }
      read.then(done, done)
    }
    return await this.#orAlone(reading, async () => this.#alone.held(key))
  }

  async latest (key: string): Promise<CacheEntry | undefined> {
    if (!this.#bus.ready) return this.#alone.held(key)
    return await this.#orAlone(this.#readShared(key), async () => this.#alone.held(key))
  }

  /**
   * The mark of the store a fill would go to now. Should the load end on the other side of an outage's
   * edge, that store takes it for no mark: stale if it remembers a purge, one revalidation at most.
   */
  async purgeMark (key: string): Promise<PurgeMark> {
    if (!this.#bus.ready) return await this.#alone.purgeMark(key)
    return await this.#orAlone(this.#driver.purgeMark(key), async () => await this.#alone.purgeMark(key))
  }

  async set (key: string, entry: CacheEntry, mark?: PurgeMark): Promise<CacheEntry | undefined> {
    if (!this.#bus.ready) return await this.#alone.set(key, entry, mark)
    const generation = this.#copies.generation
    let stored: CacheEntry | undefined
    try {
      stored = await this.#driver.set(key, entry, mark)
    } catch (error) {
      // Redis refused it (or failed meanwhile): the load still shelters the upstream from here, and is handed over later.
      this.#onError(error, key)
      return await this.#alone.set(key, entry, mark)
    }
    // A read that started before this write may answer what it replaced, and what was held alone is older.
    this.#reading.delete(key)
    this.#alone.forget(key)
    // Redis takes writes: whatever is held alone can go too.
    this.#handBack()
    if (stored === undefined) return undefined
    if (this.#bus.ready) this.#copies.keep(key, stored, generation)
    await this.#published({ type: 'filled', key, etag: stored.etag })
    return stored
  }

  /** Here at once; in Redis too, which rejects while it is down (the purge then did not reach the other instances). */
  async markStale (keys: readonly string[], now: number): Promise<number> {
    // A read or write under way (a revalidation's) may answer the entry before the purge: not copied here.
    this.#changed(keys)
    try {
      const alone = await this.#alone.markStale(keys, now)
      const shared = await this.#driver.markStale(keys, now)
      await Promise.all(keys.map(async (key) => await this.#bus.publish({ type: 'staled', key })))
      return Math.max(alone, shared)
    } finally {
      // Nor one that started while the purge was on its way to Redis, which it may have preceded there.
      this.#changed(keys)
    }
  }

  clear (): void {
    this.#copies.clear()
    this.#alone.clear()
  }

  /** What this instance holds that Redis may lack (nearly always nothing: a map lookup is skipped). */
  #heldAlone (key: string): CacheEntry | undefined {
    return this.#alone.size === 0 ? undefined : this.#alone.held(key)
  }

  /** `shared`'s answer; if it fails because Redis went down meanwhile, what this instance holds. */
  async #orAlone<T> (shared: Promise<T>, alone: () => Promise<T>): Promise<T> {
    try {
      return await shared
    } catch (error) {
      if (this.#bus.ready) throw error
      return await alone()
    }
  }

  async #readShared (key: string): Promise<CacheEntry | undefined> {
    const generation = this.#copies.generation
    const entry = await this.#driver.get(key)
    if (entry !== undefined && this.#bus.ready) this.#copies.keep(key, entry, generation)
    return entry
  }

  async #published (event: BusEvent): Promise<void> {
    // Stored is stored: a lost event costs the other instances' copies at most their few seconds.
    await this.#bus.publish(event).catch((error: unknown) => { this.#onError(error, event.key) })
  }

  #changed (keys: readonly string[]): void {
    this.#copies.changed(keys)
    for (const key of keys) this.#reading.delete(key)
  }

  #hear (event: BusEvent): void {
    if (!this.#copies.hear(event)) return
    // A request after another instance's fill or purge reads Redis anew, past what this instance holds.
    this.#reading.delete(event.key)
    this.#alone.forget(event.key)
  }

  /** Once at a time, until nothing is held alone; a hand-back Redis refuses is tried again at the next fill. */
  #handBack (): void {
    if (this.#handingBack || this.#alone.size === 0) return
    this.#handingBack = true
    this.#handOver().catch((error: unknown) => { this.#onError(error, '') }).finally(() => { this.#handingBack = false })
  }

  /** Each entry handed over leaves this instance's store, unless a newer fill replaced it meanwhile. */
  async #handOver (): Promise<void> {
    while (this.#alone.size > 0 && this.#bus.ready) {
      const entries = [...this.#alone.entries()]
      for (let i = 0; i < entries.length; i += HAND_BACK_BATCH) {
        await Promise.all(entries.slice(i, i + HAND_BACK_BATCH).map(async ([key, entry]) => {
          const stored = await this.#driver.set(key, entry)
          this.#alone.forget(key, entry)
          if (stored !== undefined) await this.#published({ type: 'filled', key, etag: stored.etag })
        }))
      }
    }
  }

  /**
   * Events may be missed from now on, so the copies stop being copies: they are kept alone, for their
   * whole life, rather than loaded again (a purge elsewhere could not reach this instance anyway).
   */
  #adoptCopies (): void {
    for (const [key, copy] of this.#copies.take()) this.#alone.set(key, copy).catch(() => {})
  }
}
