import type { LRUCache } from 'lru-cache'
import { isCancellation } from '../cancellation.ts'
import type { Claim, HeldLock } from '../redis/owner-lock.ts'
import type { RedisHealth } from '../redis/health.ts'
import { boundedLru, setUntil } from './bounded-lru.ts'
import type { CacheDriver, PurgeMark } from './driver.ts'
import { split } from './load-mark.ts'

/** Holds remembered at most: past it the oldest goes, which costs its key one revalidation more, never one fewer. */
const MAX_HOLDS = 10_000

/** A background load refused because a revalidation of its key failed less than a freshness ago (on any instance). */
export class HeldBack extends Error {
  override name = 'HeldBack'
  readonly remainingMs: number

  constructor (remainingMs: number) {
    super(`a revalidation of this key failed: the next waits ${remainingMs} ms`)
    this.remainingMs = remainingMs
  }
}

/** Whether a background load's failure holds its key's next ones back: every error but a cancellation, unless `holdsBack` says not. */
export function holdsAfter (error: unknown, holdsBack?: (error: unknown) => boolean): boolean {
  return !isCancellation(error) && !(error instanceof HeldBack) && holdsBack?.(error) !== false
}

/**
 * This instance's memory of failed revalidations: no background load of a held key starts until the hold ends (the
 * failure plus one freshness), so a failing upstream sees one revalidation per key per freshness, not one a second.
 * Without Redis it is the rule itself; with Redis it spares the claim Redis would refuse (its `:retry` key). A purge
 * frees the key, here and, heard on the bus, on the other instances; a load that started before one arms nothing.
 */
export class RevalidationHolds {
  readonly #until: LRUCache<string, number>
  /** Each key's purges (a running count) while a load that started before one may still fail. */
  readonly #purges: LRUCache<string, number>
  readonly #purgeMemoryMs: number
  #purgeCount = 0

  constructor ({ now, purgeMemoryMs }: { now: () => number, purgeMemoryMs: number }) {
    this.#until = boundedLru({ maxEntries: MAX_HOLDS, now })
    this.#purges = boundedLru({ maxEntries: MAX_HOLDS, now })
    this.#purgeMemoryMs = purgeMemoryMs
  }

  held (key: string): boolean {
    return this.#until.has(key)
  }

  /** What a background load starting now hands to `hold` when it fails: a purge since then frees the key. */
  since (key: string): number {
    return this.#purges.get(key) ?? 0
  }

  hold (key: string, since: number, ms: number): void {
    if (this.since(key) === since) setUntil(this.#until, key, ms, this.#until.perf.now() + ms)
  }

  /** Every hold forgotten: another instance's purges may have gone unheard. */
  clear (): void {
    this.#until.clear()
  }

  purged (keys: readonly string[]): void {
    const now = this.#purges.perf.now()
    for (const key of keys) {
      this.#until.delete(key)
      setUntil(this.#purges, key, ++this.#purgeCount, now + this.#purgeMemoryMs)
    }
  }
}

/** What the loader asks Redis about holds: a background load's claim, refused while a hold lasts, and a failure's hold. */
export interface SharedHolds {
  claimUnlessHeld: (key: string) => Promise<Claim | undefined>
  holdBack: (key: string, ms: number, loadMark: PurgeMark | undefined, lock?: HeldLock) => Promise<void>
}

/** Redis's holds, where the driver keeps them; while Redis is down the loads go alone, held by this instance's memory. */
export function sharedHolds (
  driver: CacheDriver, redis: Pick<RedisHealth, 'up'>, onError: (error: unknown, key: string) => void
): SharedHolds | undefined {
  const { claimUnlessHeld, holdBack } = driver
  if (claimUnlessHeld === undefined || holdBack === undefined) return undefined
  return {
    claimUnlessHeld: async (key) => {
      if (!redis.up) return undefined
      try {
        return await claimUnlessHeld(key)
      } catch (error) {
        if (error instanceof HeldBack) throw error
        onError(error, key)
        return undefined
      }
    },
    holdBack: async (key, ms, loadMark, lock) => {
      const { mark } = split(loadMark)
      // A mark unread (the store failed) may hide a purge: no hold, one revalidation more at most.
      if (!redis.up || mark === undefined) return
      await holdBack(key, ms, mark, lock).catch((error: unknown) => { onError(error, key) })
    }
  }
}
