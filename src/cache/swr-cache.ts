import { isFresh, isServable, type CacheEntry } from './cache-entry.js'
import type { CacheStore } from './store.js'

export type CacheState = 'HIT' | 'MISS' | 'STALE' | 'BYPASS'

export interface Served {
  entry: CacheEntry
  state: CacheState
}

export interface SwrCacheOptions {
  store: CacheStore
  now?: () => number
  /** Background revalidations fail without a caller to tell: they are reported here. */
  onBackgroundError: (error: unknown, key: string) => void
}

/**
 * Stale-while-revalidate over a store. Fresh entries are served; stale ones are served at once and
 * refreshed in the background, once per key; misses load through one shared promise per key, so
 * concurrent callers cost one upstream call. A failed load never replaces a good entry.
 */
export class SwrCache {
  readonly #store: CacheStore
  readonly #now: () => number
  readonly #onBackgroundError: SwrCacheOptions['onBackgroundError']
  readonly #inFlight = new Map<string, Promise<CacheEntry>>()

  constructor (options: SwrCacheOptions) {
    this.#store = options.store
    this.#now = options.now ?? Date.now
    this.#onBackgroundError = options.onBackgroundError
  }

  async get (key: string, load: () => Promise<CacheEntry>): Promise<Served> {
    const cached = await this.#store.get(key)
    const now = this.#now()
    if (cached !== undefined && isFresh(cached, now)) return { entry: cached, state: 'HIT' }
    if (cached !== undefined && isServable(cached, now)) {
      this.#load(key, load).catch((error: unknown) => this.#onBackgroundError(error, key))
      return { entry: cached, state: 'STALE' }
    }
    return { entry: await this.#load(key, load), state: 'MISS' }
  }

  #load (key: string, load: () => Promise<CacheEntry>): Promise<CacheEntry> {
    let pending = this.#inFlight.get(key)
    if (pending === undefined) {
      pending = this.#loadAndStore(key, load).finally(() => this.#inFlight.delete(key))
      this.#inFlight.set(key, pending)
    }
    return pending
  }

  async #loadAndStore (key: string, load: () => Promise<CacheEntry>): Promise<CacheEntry> {
    const entry = await load()
    await this.#store.set(key, entry)
    return entry
  }
}
