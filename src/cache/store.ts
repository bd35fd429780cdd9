import type { CacheEntry } from './cache-entry.ts'

/** Names a key's last remembered purge ('' for none); only the store that made it can match it. */
export type PurgeMark = string

/**
 * Where entries live: Redis (with an in-process tier in front), or a bounded map in this process. Keys
 * arrive fully built. A store that cannot be reached rejects: the cache then answers BYPASS.
 */
export interface CacheStore {
  get: (key: string) => Promise<CacheEntry | undefined>
  /**
   * What this process holds for the key, without I/O: the hit path asks it first, and asks `get` only when
   * it answers undefined. Stores that hold nothing in this process need not implement it.
   */
  peek?: (key: string) => CacheEntry | undefined
  /**
   * What the store holds now, read after every write this process has seen (a lock won, an event
   * received): no copy and no read already in flight may answer it. Stores whose `get` gives that
   * already need not implement it.
   */
  getLatest?: (key: string) => Promise<CacheEntry | undefined>
  /**
   * The key's purge mark, read when a load of it starts (before the upstream is asked) and handed back to
   * `set`: a purge replaces it, so the store alone orders purges and loads, whatever the instances' clocks.
   */
  purgeMark: (key: string) => Promise<PurgeMark>
  /**
   * Stores `entry` until its `staleUntil`, unless a newer fill of the key is already stored (instances
   * may finish loads out of order), and as stale if the key was purged since `mark` was read (without a
   * mark, or with another store's: if a purge is remembered at all); resolves to what was stored, or undefined.
   */
  set: (key: string, entry: CacheEntry, mark?: PurgeMark) => Promise<CacheEntry | undefined>
  /** Makes the entries stale as of `now` (they stay servable while revalidating); resolves to how many exist. */
  markStale: (keys: readonly string[], now: number) => Promise<number>
  close: () => Promise<void>
}
