import { untilAborted } from '../cancellation.ts'
import type { Claim, HeldLock } from '../redis/owner-lock.ts'
import { currentSpan, linkTo } from '../telemetry/tracing.ts'
import { isFresh, isServable, sameVersion, type CacheEntry } from './cache-entry.ts'
import type { PurgeMark, Tier } from './driver.ts'
import type { StartLoad } from './flights.ts'
import type { SharedHolds } from './revalidation-holds.ts'

/** Who loads a key across the instances sharing Redis: absent for the in-process cache, or while Redis is away. */
interface OwnerLocks {
  claim: (key: string) => Promise<Claim | undefined>
  /** How many times a load waits for another instance's (each wait lasts at most a lock's lifetime) before it goes ahead alone. */
  maxClaims: number
  /** Redis's holds after failed revalidations (revalidation-holds.ts); absent: none across instances. */
  holds?: SharedHolds
}

/** A background load's hold: a failure `after` accepts holds the key's next background loads for `ms`, on every instance. */
export interface LoadHold {
  ms: number
  after: (error: unknown) => boolean
}

/** One claim of a key's load: the claim, another instance's fill found meanwhile, and the purge mark the load stores against. */
interface Attempt {
  claiming: Promise<Claim | undefined>
  looking: Promise<CacheEntry | undefined>
  marking: Promise<PurgeMark | undefined>
}

export interface LoaderOptions {
  tier: Pick<Tier, 'latest' | 'purgeMark' | 'set' | 'takeClaim'>
  locks: OwnerLocks | undefined
  now: () => number
  /** A store that is away costs the cache, never the caller. */
  onStoreError: (error: unknown, key: string) => void
}

/**
 * Loads a key and stores what it loaded, once across instances: the owner of the key's lock loads; the
 * others wait for its release and read what it stored. A failed load never touches a stored entry.
 */
export class Loader {
  readonly #options: LoaderOptions

  constructor (options: LoaderOptions) {
    this.#options = options
  }

  /**
   * `seen` is what this instance found (a stale entry, nothing, or a fresh one refreshed ahead of time): a
   * fresh entry, or another version, in the store means another instance has loaded it meanwhile. A waiter woken with nothing new claims again
   * rather than loading at once: what woke it may be the late release of an earlier lock while another
   * instance's load is still running. After `maxClaims` waits it loads on its own. `waited` hears of a
   * load that waits for another instance's. `refusesNow` tells a refusal known before any call (no token while the
   * upstream's identity provider fails, a back-off, a budget spent): that load fails at once, with no lock and no more reads.
   * `hold`, a background load's: its claim is refused (HeldBack) while a failed one's hold lasts, and its failure holds.
   */
  async load (
    key: string, seen: CacheEntry | undefined, start: StartLoad, signal: AbortSignal, waited: () => void, refusesNow?: () => Error | undefined,
    hold?: LoadHold
  ): Promise<CacheEntry> {
    const refused = refusesNow?.()
    if (refused !== undefined) throw refused
    const { locks } = this.#options
    if (locks === undefined) return await this.#loadAndStore(key, start, signal, this.#purgeMark(key))
    for (let attempt = 1; ; attempt++) {
      const { claiming, looking, marking } = (attempt === 1 ? this.#claimedByRead(key) : undefined) ?? this.#claimNow(locks, key, seen, hold)
      const claim = await claiming
      // The span of the load this runs for says which instance loaded it, and links a waiter to the load that answered it.
      const span = currentSpan()
      span.setAttribute('pbff.lock', claim === undefined ? 'unavailable' : claim.owner ? 'owner' : 'waiter')
      if (claim === undefined) return await this.#loadAndStore(key, start, signal, marking, undefined, hold)
      if (claim.owner) {
        try {
          // The previous owner may have finished between our read and our lock.
          return await looking ?? await this.#loadAndStore(key, start, signal, marking, claim.lock, hold)
        } finally {
          // Also when cancelled, so the other instances' waiters move on; the release reports its own failures.
          claim.release().catch(() => {})
        }
      }
      if (attempt === 1) waited()
      const ownerSpan = await untilAborted(claim.settled, signal)
      const loaded = await this.#loadedElsewhere(key, seen)
      if (loaded !== undefined) {
        linkTo(span, ownerSpan)
        return loaded
      }
      if (attempt >= locks.maxClaims) return await this.#loadAndStore(key, start, signal, this.#purgeMark(key), undefined, hold)
    }
  }

  /** The claim, purge mark and look for another instance's fill that a cold miss's read made, in one script: nothing to look for since. */
  #claimedByRead (key: string): Attempt | undefined {
    const claimed = this.#options.tier.takeClaim?.(key)
    if (claimed === undefined) return undefined
    return { claiming: Promise.resolve(claimed.claim), looking: Promise.resolve(undefined), marking: Promise.resolve(claimed.mark) }
  }

  /**
   * The look for another instance's fill and the purge mark go out right behind the claim, on its
   * connection, so Redis runs them after it: one round trip where three waited on each other.
   */
  #claimNow (locks: OwnerLocks, key: string, seen: CacheEntry | undefined, hold: LoadHold | undefined): Attempt {
    const claiming = hold !== undefined && locks.holds !== undefined ? locks.holds.claimUnlessHeld(key) : locks.claim(key)
    return { claiming, looking: this.#loadedElsewhere(key, seen), marking: this.#purgeMark(key) }
  }

  async #loadedElsewhere (key: string, seen: CacheEntry | undefined): Promise<CacheEntry | undefined> {
    let current: CacheEntry | undefined
    try {
      // Past shared reads in flight: one that began before the other load was stored would say "not yet".
      current = await this.#options.tier.latest(key)
    } catch (error) {
      this.#options.onStoreError(error, key)
      return undefined
    }
    const now = this.#options.now()
    if (current === undefined || !isServable(current, now)) return undefined
    // What this instance saw was fresh (a refresh ahead of time): only another version is news.
    if (seen !== undefined && isFresh(seen, now)) return sameVersion(current, seen) ? undefined : current
    return isFresh(current, now) || !sameVersion(current, seen) ? current : undefined
  }

  /** Read before the upstream is asked, so that a purge after it stores the fill stale; unread, the store takes a purge it remembers as later. */
  async #purgeMark (key: string): Promise<PurgeMark | undefined> {
    return await this.#options.tier.purgeMark(key).catch((error: unknown) => { this.#options.onStoreError(error, key); return undefined })
  }

  /** `lock`, held for this load, is released by the store's own write where it can (one round trip after the call), or by its hold's. */
  async #loadAndStore (
    key: string, start: StartLoad, signal: AbortSignal, marking: Promise<PurgeMark | undefined>, lock?: HeldLock, hold?: LoadHold
  ): Promise<CacheEntry> {
    const mark = await marking
    // Its callers may have gone during that read.
    signal.throwIfAborted()
    let entry: CacheEntry
    try {
      entry = await start(signal)
    } catch (error) {
      // Held before the lock is released: a waiter it wakes then finds the hold, not a free lock.
      if (hold?.after(error) === true) await this.#options.locks?.holds?.holdBack(key, hold.ms, mark, lock)
      throw error
    }
    const stored = await this.#options.tier.set(key, entry, mark, lock).catch((error: unknown) => { this.#options.onStoreError(error, key) })
    // Stored stale (a purge came during the load): its callers are told so, not a freshness the store does not hold.
    return stored !== undefined && sameVersion(stored, entry) ? stored : entry
  }
}
