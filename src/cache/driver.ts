import type { Claim, HeldLock } from '../redis/owner-lock.ts'
import type { CacheEntry } from './cache-entry.ts'

/** Names a key's last remembered purge ('' for none); only the driver that made it can match it. */
export type PurgeMark = string

/**
 * The mark of an entry handed back to Redis after an outage: a purge made meanwhile may be forgotten already (past
 * `purgeMemoryMs`), so where Redis holds any version of the key it is stored stale, and the version it holds is kept.
 */
export const HANDED_BACK: PurgeMark = 'handed-back'

/** A key's load claimed by the read that found nothing servable, with the purge mark read in the same round trip. */
export interface ClaimedLoad {
  claim: Claim
  mark: PurgeMark
}

/**
 * Where entries are stored: Redis, or a bounded map in this process. Keys arrive fully built. A driver
 * stores and reads; telling the other instances is the cache stack's job. One that cannot be reached rejects.
 */
export interface CacheDriver {
  get: (key: string) => Promise<CacheEntry | undefined>
  /**
   * `get`, which also claims the key's load and reads its purge mark, in the same round trip, when nothing servable
   * is there (a cold miss then waits for one round trip before its call). Absent: the driver cannot (in-process).
   */
  getOrClaim?: (key: string) => Promise<{ entry: CacheEntry | undefined, claimed?: ClaimedLoad }>
  /**
   * A background load's claim of the key's lock (see `getOrClaim`), in one round trip, refused with HeldBack while a
   * failed revalidation's hold (`holdBack`) lasts. Absent: the driver keeps no holds.
   */
  claimUnlessHeld?: (key: string) => Promise<Claim | undefined>
  /**
   * After a background load of the key failed: no instance's background load claims it for `ms`, unless the key was
   * purged since `mark` was read; releases `lock` (the load's) in the same round trip where the driver `announcesFills`.
   */
  holdBack?: (key: string, ms: number, mark: PurgeMark, lock?: HeldLock) => Promise<void>
  /** Whether `set` tells the other instances of what it stored, and releases `lock`, in its own round trip (`markStale` of its purges too). */
  readonly announcesFills?: boolean
  /**
   * The key's purge mark, read when a load of it starts (before the upstream is asked) and handed back to
   * `set`: a purge replaces it, so the driver alone orders purges and loads, whatever the instances' clocks.
   */
  purgeMark: (key: string) => Promise<PurgeMark>
  /**
   * Stores `entry` until its `staleUntil`, unless a newer fill of the key is already stored (instances
   * may finish loads out of order), and as stale if the key was purged since `mark` was read (without a
   * mark, or with another driver's: if a purge is remembered at all); resolves to what was stored, or undefined.
   * `lock`, the load's, is released with the write where the driver `announcesFills` (else by its owner).
   */
  set: (key: string, entry: CacheEntry, mark?: PurgeMark, lock?: HeldLock) => Promise<CacheEntry | undefined>
  /** Makes the entries stale as of `now` (they stay servable while revalidating); resolves to how many exist. */
  markStale: (keys: readonly string[], now: number) => Promise<number>
}

/** What the cache stack reads and writes through: this process's memory alone, or Redis behind short copies. */
export interface Tier extends CacheDriver {
  /** With `claiming` (the default), a read that finds nothing servable claims the key's load where the store can (see `getOrClaim`). */
  get: (key: string, claiming?: boolean) => Promise<CacheEntry | undefined>
  /** What this process holds for the key, without I/O: the hit path asks it first. */
  held: (key: string) => CacheEntry | undefined
  /** What the store holds now, read after every write this process has seen: no copy and no read in flight answers it. */
  latest: (key: string) => Promise<CacheEntry | undefined>
  /** The load a read of the key claimed (see `getOrClaim`), taken once: the first load of the key after that read owns it. */
  takeClaim?: (key: string) => ClaimedLoad | undefined
  /** Forgets what this process holds. */
  clear: () => void
}
