import { isFresh, isServable, sameVersion, type CacheEntry, type CacheState } from './cache-entry.ts'
import type { Claim } from '../redis/owner-lock.ts'
import type { CacheStore } from './store.ts'
import type { Resource } from '../resources.ts'
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.ts'

export interface Served {
  entry: CacheEntry
  state: CacheState
  /** When the cache decided: what is left of freshness, and the entry's age, count from here. */
  at: number
}

/** Where a cache failure happened: a background revalidation, or the store (read, write, purge). */
export type CacheFailure = 'revalidate' | 'store'

export interface SwrCacheOptions {
  store: CacheStore
  /**
   * Coordinates loads with the other instances sharing the store; absent for the in-process store.
   * `maxClaims`: how many times a load waits for another instance's (each wait lasts at most the
   * lock's lifetime) before it goes ahead on its own.
   */
  coalescer?: { claim: (key: string) => Promise<Claim | undefined>, maxClaims: number }
  now?: () => number
  telemetry?: Pick<Telemetry, 'cacheResult' | 'coalescedWaiter'>
  /** Failures without a caller to tell: a revalidation in the background, a store that is away. */
  onError: (error: unknown, key: string, failure: CacheFailure) => void
}

/**
 * Stale-while-revalidate over a store. Fresh entries are served (HIT); stale ones are served at once
 * (STALE) and refreshed in the background, once; misses are loaded (MISS). Loads of one key are shared
 * by every caller in this process and, through the coalescer, by every instance. A failed load never
 * touches a stored entry. When the store cannot be read, the answer comes straight from the load
 * (BYPASS), still shared in this process.
 */
export class SwrCache {
  readonly #store: CacheStore
  readonly #coalescer: SwrCacheOptions['coalescer']
  readonly #now: () => number
  readonly #telemetry: NonNullable<SwrCacheOptions['telemetry']>
  readonly #onError: SwrCacheOptions['onError']
  readonly #inFlight = new Map<string, Promise<CacheEntry>>()

  constructor (options: SwrCacheOptions) {
    this.#store = options.store
    this.#coalescer = options.coalescer
    this.#now = options.now ?? Date.now
    this.#telemetry = options.telemetry ?? noTelemetry
    this.#onError = options.onError
  }

  async get (key: string, resource: Resource, load: () => Promise<CacheEntry>): Promise<Served> {
    const served = await this.#serve(key, resource, load)
    this.#telemetry.cacheResult(resource, served.state)
    return served
  }

  /** Purge: the entries become stale everywhere, so the next read serves them and revalidates once. */
  async markStale (keys: readonly string[]): Promise<number> {
    return await this.#store.markStale(keys, this.#now())
  }

  async #serve (key: string, resource: Resource, load: () => Promise<CacheEntry>): Promise<Served> {
    let cached: CacheEntry | undefined
    try {
      cached = await this.#store.get(key)
    } catch (error) {
      this.#onError(error, key, 'store')
      const entry = await this.#load(key, resource, undefined, load)
      return { entry, state: 'BYPASS', at: this.#now() }
    }
    const now = this.#now()
    if (cached !== undefined && isFresh(cached, now)) return { entry: cached, state: 'HIT', at: now }
    if (cached !== undefined && isServable(cached, now)) {
      if (!this.#inFlight.has(key)) {
        this.#load(key, resource, cached, load).catch((error: unknown) => this.#onError(error, key, 'revalidate'))
      }
      return { entry: cached, state: 'STALE', at: now }
    }
    const entry = await this.#load(key, resource, undefined, load)
    return { entry, state: 'MISS', at: this.#now() }
  }

  /** One load per key at a time in this process: later callers wait for the first one's. */
  async #load (key: string, resource: Resource, seen: CacheEntry | undefined, load: () => Promise<CacheEntry>): Promise<CacheEntry> {
    const pending = this.#inFlight.get(key)
    if (pending !== undefined) {
      this.#telemetry.coalescedWaiter(resource)
      return await pending
    }
    const started = this.#loadShared(key, resource, seen, load).finally(() => this.#inFlight.delete(key))
    this.#inFlight.set(key, started)
    return await started
  }

  /**
   * One load per key across instances. `seen` is what this instance found (a stale entry or nothing):
   * a fresh entry, or another version, in the store means another instance has loaded it meanwhile.
   * A waiter woken with nothing new claims again rather than loading at once: what woke it may be the
   * late release of an earlier lock while another instance's load is still running. After
   * `maxClaims` waits it loads on its own (each wait is bounded by the lock's lifetime).
   */
  async #loadShared (key: string, resource: Resource, seen: CacheEntry | undefined, load: () => Promise<CacheEntry>): Promise<CacheEntry> {
    for (let attempt = 1; ; attempt++) {
      const claim = await this.#coalescer?.claim(key)
      if (claim === undefined) return await this.#loadAndStore(key, load)
      if (claim.owner) {
        try {
          // The previous owner may have finished between our read and our lock.
          return await this.#loadedElsewhere(key, seen) ?? await this.#loadAndStore(key, load)
        } finally {
          // Callers need not wait for the release: it reports its own failures, and the lock expires anyway.
          claim.release().catch(() => {})
        }
      }
      if (attempt === 1) this.#telemetry.coalescedWaiter(resource)
      await claim.settled
      const loaded = await this.#loadedElsewhere(key, seen)
      if (loaded !== undefined) return loaded
      if (attempt >= (this.#coalescer?.maxClaims ?? 1)) return await this.#loadAndStore(key, load)
    }
  }

  async #loadedElsewhere (key: string, seen: CacheEntry | undefined): Promise<CacheEntry | undefined> {
    let current: CacheEntry | undefined
    try {
      // Read past shared reads in flight: one that began before the other load was stored would say "not yet".
      current = await (this.#store.getLatest ?? this.#store.get).call(this.#store, key)
    } catch (error) {
      this.#onError(error, key, 'store')
      return undefined
    }
    const now = this.#now()
    if (current === undefined || !isServable(current, now)) return undefined
    return isFresh(current, now) || !sameVersion(current, seen) ? current : undefined
  }

  async #loadAndStore (key: string, load: () => Promise<CacheEntry>): Promise<CacheEntry> {
    // Read before the upstream is asked, so that a purge after it stores the fill stale. Unread, the
    // store takes a purge it remembers as later (the write reports a store that is away).
    const mark = await this.#store.purgeMark(key).catch(() => undefined)
    const entry = await load()
    // A store that is away costs the cache, never the caller.
    await this.#store.set(key, entry, mark).catch((error: unknown) => this.#onError(error, key, 'store'))
    return entry
  }
}
