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
  /** This instance's own store while Redis is away. */
  alone: MemoryDriver
  /** A fill or purge the other instances could not be told of (their copies then live out their few seconds). */
  onError: (error: unknown) => void
}

/** Entries handed to Redis at once when it is back. */
const HAND_BACK_BATCH = 100

/**
 * Redis with this instance in front of it. While Redis is up, hits are answered from short copies,
 * shared reads of one key are made once however many requests want it, and fills and purges are told
 * to the other instances. While Redis is down or its events are lost, this instance's own store is the
 * cache, for each entry's whole life, so the upstream stays sheltered. When Redis is back, what was
 * filled alone is handed to Redis (set-if-newer) before reads go there again, so that no hot key turns
 * into an upstream call.
 */
export class SharedTier implements Tier {
  readonly #driver: CacheDriver
  readonly #bus: SharedTierOptions['bus']
  readonly #copies: NearCopies
  readonly #alone: MemoryDriver
  readonly #onError: SharedTierOptions['onError']
  /** Shared reads in flight: a hot key's requests arrive together when its copy expires. */
  readonly #reading = new Map<string, Promise<CacheEntry | undefined>>()
  #handingBack: Promise<void> | undefined

  constructor (options: SharedTierOptions) {
    this.#driver = options.driver
    this.#bus = options.bus
    this.#copies = options.copies
    this.#alone = options.alone
    this.#onError = options.onError
    options.bus.listen({
      onEvent: (event) => { this.#hear(event) },
      onLost: () => { this.#adoptCopies().catch(options.onError) },
      onReady: () => { this.#handBack() }
    })
  }

  held (key: string): CacheEntry | undefined {
    return this.#sharing() ? this.#copies.get(key) : this.#alone.held(key)
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    if (!this.#sharing()) return this.#alone.held(key)
    const copy = this.#copies.get(key)
    if (copy !== undefined) return copy
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
    return this.#sharing() ? await this.#readShared(key) : this.#alone.held(key)
  }

  /**
   * The mark of the store a fill would go to now. Should the load end on the other side of an outage's
   * edge, that store takes it for no mark: stale if it remembers a purge, one revalidation at most.
   */
  async purgeMark (key: string): Promise<PurgeMark> {
    if (!this.#sharing()) return await this.#alone.purgeMark(key)
    return await this.#orAlone(this.#driver.purgeMark(key), async () => await this.#alone.purgeMark(key))
  }

  async set (key: string, entry: CacheEntry, mark?: PurgeMark): Promise<CacheEntry | undefined> {
    if (!this.#sharing()) {
      // Redis may have been up all along (a failed hand-back): fills are the moment to try again.
      if (this.#bus.ready) this.#handBack()
      return await this.#alone.set(key, entry, mark)
    }
    const generation = this.#copies.generation
    let stored: CacheEntry | undefined
    try {
      stored = await this.#driver.set(key, entry, mark)
    } catch {
      // Redis failed meanwhile: the load still shelters the upstream from here, and is handed over later.
      if (this.#bus.ready) this.#handBack()
      return await this.#alone.set(key, entry, mark)
    }
    // A read that started before this write may answer what it replaced.
    this.#reading.delete(key)
    if (stored === undefined) return undefined
    this.#keep(key, stored, generation)
    // Stored is stored: a lost event costs the other instances' copies at most their few seconds.
    await this.#bus.publish({ type: 'filled', key, etag: stored.etag }).catch(this.#onError)
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

  /** Redis serves while it is up, its events reach us and nothing filled alone waits to be handed over. */
  #sharing (): boolean {
    return this.#bus.ready && this.#alone.size === 0
  }

  /** `shared`'s answer; if it fails because Redis went down meanwhile, what this instance holds since. */
  async #orAlone<T> (shared: Promise<T>, alone: () => Promise<T>): Promise<T> {
    try {
      return await shared
    } catch (error) {
      if (this.#sharing()) throw error
      return await alone()
    }
  }

  async #readShared (key: string): Promise<CacheEntry | undefined> {
    const generation = this.#copies.generation
    const entry = await this.#driver.get(key)
    if (entry !== undefined) this.#keep(key, entry, generation)
    return entry
  }

  #keep (key: string, entry: CacheEntry, generation: number): void {
    if (this.#bus.ready) this.#copies.keep(key, entry, generation)
  }

  #changed (keys: readonly string[]): void {
    this.#copies.changed(keys)
    for (const key of keys) this.#reading.delete(key)
  }

  #hear (event: BusEvent): void {
    // A request after another instance's fill or purge starts a read of its own rather than join an older one.
    if (this.#copies.hear(event)) this.#reading.delete(event.key)
  }

  /** Once at a time; a hand-back that fails leaves this instance on its own until the next try. */
  #handBack (): void {
    if (this.#handingBack !== undefined || this.#alone.size === 0) return
    this.#handingBack = this.#handOver().finally(() => { this.#handingBack = undefined })
  }

  async #handOver (): Promise<void> {
    const entries = [...this.#alone.entries()]
    try {
      for (let i = 0; i < entries.length; i += HAND_BACK_BATCH) {
        await Promise.all(entries.slice(i, i + HAND_BACK_BATCH).map(async ([key, entry]) => await this.#driver.set(key, entry)))
      }
    } catch {
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
    for (const [key, copy] of this.#copies.take()) await this.#alone.set(key, copy)
  }
}
