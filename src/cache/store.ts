import type { CacheEntry } from './cache-entry.js'

/** Where entries live: Redis, or a bounded map in this process. Keys arrive fully built. */
export interface CacheStore {
  get: (key: string) => Promise<CacheEntry | undefined>
  /** Stores `entry` until its `staleUntil`. */
  set: (key: string, entry: CacheEntry) => Promise<void>
  close: () => Promise<void>
}
