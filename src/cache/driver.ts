import type { CacheEntry } from './cache-entry.ts'

/** Names a key's last remembered purge ('' for none); only the driver that made it can match it. */
export type PurgeMark = string

/**
 * Where entries are stored: Redis, or a bounded map in this process. Keys arrive fully built. A driver
 * stores and reads; telling the other instances is the cache stack's job. One that cannot be reached rejects.
 */
export interface CacheDriver {
  get: (key: string) => Promise<CacheEntry | undefined>
  /**
   * The key's purge mark, read when a load of it starts (before the upstream is asked) and handed back to
   * `set`: a purge replaces it, so the driver alone orders purges and loads, whatever the instances' clocks.
   */
  purgeMark: (key: string) => Promise<PurgeMark>
  /**
   * Stores `entry` until its `staleUntil`, unless a newer fill of the key is already stored (instances
   * may finish loads out of order), and as stale if the key was purged since `mark` was read (without a
   * mark, or with another driver's: if a purge is remembered at all); resolves to what was stored, or undefined.
   */
  set: (key: string, entry: CacheEntry, mark?: PurgeMark) => Promise<CacheEntry | undefined>
  /** Makes the entries stale as of `now` (they stay servable while revalidating); resolves to how many exist. */
  markStale: (keys: readonly string[], now: number) => Promise<number>
}

/** What the cache stack reads and writes through: this process's memory alone, or Redis behind short copies. */
export interface Tier extends CacheDriver {
  /** What this process holds for the key, without I/O: the hit path asks it first. */
  held: (key: string) => CacheEntry | undefined
  /** What the store holds now, read after every write this process has seen: no copy and no read in flight answers it. */
  latest: (key: string) => Promise<CacheEntry | undefined>
  /** Forgets what this process holds. */
  clear: () => void
}
