import { isCancellation, isDeadline, withDeadline } from '../cancellation.ts'
import { UPSTREAM_TIMEOUT } from '../errors.ts'
import type { Arrival, LoadBudget } from '../load-budget.ts'
import type { CacheState, Priority, Resource } from '../resources.ts'
import type { RedisHealth } from '../redis/health.ts'
import type { Claim } from '../redis/owner-lock.ts'
import type { Telemetry } from '../telemetry/telemetry.ts'
import { inSpan, linkTo } from '../telemetry/tracing.ts'
import { isFresh, isServable, type CacheEntry } from './cache-entry.ts'
import type { CacheDriver, Tier } from './driver.ts'
import { Flights, type FlightCause, type StartLoad } from './flights.ts'
import { Loader, type LoadHold } from './loader.ts'
import { MemoryDriver, type MemoryDriverOptions } from './memory-driver.ts'
import { NearCopies } from './near-copies.ts'
import { RefreshAhead } from './refresh-ahead.ts'
import { HeldBack, holdsAfter, RevalidationHolds, sharedHolds } from './revalidation-holds.ts'
import { SharedTier, type TierBus } from './shared-tier.ts'

export interface Served {
  entry: CacheEntry
  state: CacheState
  /** When the cache decided: what is left of freshness, and the entry's age, count from here. */
  at: number
}

/**
 * Loads an entry; `signal` aborts when nobody waits for it any more (a call already sent goes on, and its answer is
 * stored), `priority` says who waits (for the fleet's upstream budget), `deadlineAt` (the app's clock) is the load's one
 * deadline: when the caller that started it gives up, or, for a background load, `callerMs` after it started.
 */
export type Load = ((signal: AbortSignal, priority: Priority, deadlineAt: number) => Promise<CacheEntry>) & {
  /** A refusal known before the load would start (see Loader.load); undefined: it may load. */
  refusesNow?: (priority: Priority, deadlineAt: number) => Error | undefined
  /** Whether `refusesNow` would refuse, counting nothing: a read then claims no load it would only release. */
  wouldRefuse?: (priority: Priority, deadlineAt: number) => boolean
}

/** A load's priority, from why it started: a caller with nothing to serve waits on a miss or a bypass, nobody on a revalidation. */
const PRIORITY_OF: Record<FlightCause, Priority> = { miss: 'caller', bypass: 'caller', revalidation: 'background', 'refresh-ahead': 'refresh-ahead' }

/** Where a cache failure happened: a background revalidation, or the store (read, write, purge). */
export type CacheFailure = 'revalidate' | 'store'

export interface CacheStackOptions {
  /** Bounds of this process's store: the whole cache without Redis, and this instance's own while Redis is away. */
  memory?: Omit<MemoryDriverOptions, 'purgeMemoryMs' | 'now'>
  /** Redis, the bus the instances tell each other on, and the lock that elects one loader per key; absent: in-process only. */
  shared?: {
    driver: CacheDriver
    redis: Pick<RedisHealth, 'up' | 'listen'>
    bus: TierBus
    claim: (key: string) => Promise<Claim | undefined>
  }
  budget: Pick<LoadBudget, 'purgeMemoryMs' | 'maxClaims' | 'callerWaitMs' | 'callerLoadMs' | 'callerMs'>
  now: () => number
  /** How long an entry of this kind is configured fresh, before jitter: refresh-ahead waits for nine tenths of it. */
  freshMs: (resource: Resource, status: CacheEntry['status']) => number
  telemetry: Pick<Telemetry, 'cacheResult' | 'coalescedWaiter'>
  /** Whether a failed background load holds its key's next ones back for a freshness (default: every failure but a cancellation). */
  holdsBack?: (error: unknown) => boolean
  /** Failures without a caller to tell: a revalidation in the background, a store that is away. */
  onError: (error: unknown, key: string, failure: CacheFailure) => void
}

/**
 * The cache: this process's tier in front of Redis's (or alone), the bus that keeps them coherent, one
 * load per key across instances, stale-while-revalidate. `lookup` answers a fresh entry held here at
 * once, without a promise (the path most requests take); anything else is a promise: a fresh entry read
 * from Redis (HIT), a stale one served while it is refreshed in the background, once (STALE), or a load
 * shared by every caller of the key in this process and, through the lock, every instance (MISS). When
 * the store cannot be read the answer comes straight from the load (BYPASS), still shared here. A caller
 * whose signal aborts stops waiting at once; a load its callers have all left is dropped if its call is not sent yet
 * (and stores nothing), else runs on and stores its answer.
 */
export class CacheStack {
  readonly #tier: Tier
  readonly #loader: Loader
  readonly #flights = new Flights()
  readonly #refreshAhead = new RefreshAhead()
  readonly #freshMs: CacheStackOptions['freshMs']
  readonly #budget: CacheStackOptions['budget']
  readonly #now: () => number
  readonly #telemetry: CacheStackOptions['telemetry']
  readonly #onError: CacheStackOptions['onError']
  readonly #holds: RevalidationHolds
  readonly #holdsAfter: (error: unknown) => boolean

  constructor ({ memory, shared, budget, now, freshMs, telemetry, holdsBack, onError }: CacheStackOptions) {
    const local = new MemoryDriver({ ...memory, purgeMemoryMs: budget.purgeMemoryMs, now })
    this.#tier = shared === undefined
      ? local
      : new SharedTier({
        driver: shared.driver,
        redis: shared.redis,
        bus: shared.bus,
        copies: new NearCopies({ now }),
        alone: local,
        onError: (error, key) => { onError(error, key, 'store') }
      })
    this.#loader = new Loader({
      tier: this.#tier,
      locks: shared === undefined
        ? undefined
        : { claim: shared.claim, maxClaims: budget.maxClaims, holds: sharedHolds(shared.driver, shared.redis, (error, key) => { onError(error, key, 'store') }) },
      now,
      onStoreError: (error, key) => { onError(error, key, 'store') }
    })
    this.#freshMs = freshMs
    this.#budget = budget
    this.#now = now
    this.#telemetry = telemetry
    this.#onError = onError
    this.#holds = new RevalidationHolds({ now, purgeMemoryMs: budget.purgeMemoryMs })
    this.#holdsAfter = (error) => holdsAfter(error, holdsBack)
    // Another's purge frees the key here too (ours: markStale); one unheard while the bus was away leaves Redis to decide.
    shared?.bus.listen((event) => { if (event.type === 'staled') this.#holds.purged([event.key]) })
    shared?.bus.listenReady(() => { this.#holds.clear() })
  }

  /** `signal` aborts when the caller goes away (absent: a caller that never leaves); its time counts from `arrival` (absent: now). */
  lookup (key: string, resource: Resource, load: Load, signal?: AbortSignal, arrival?: Arrival): Served | Promise<Served> {
    return this.heldFresh(key, resource, load) ?? inSpan('cache.lookup', { 'pbff.resource': resource }, async (span) => {
      const served = await this.#resolve(key, resource, load, signal, arrival)
      span.setAttribute('pbff.cache.state', served.state)
      return this.#reported(resource, served)
    })
  }

  /** The key's entry as a hit, when this process holds it fresh (no read of the store); else undefined. */
  heldFresh (key: string, resource: Resource, load: Load): Served | undefined {
    const now = this.#now()
    const held = this.#tier.held(key)
    return held !== undefined && isFresh(held, now) ? this.#reported(resource, this.#hit(key, resource, held, load, now)) : undefined
  }

  /** Purge: the entries become stale everywhere, so the next read serves them and revalidates once. */
  async markStale (keys: readonly string[]): Promise<number> {
    this.#holds.purged(keys)
    return await this.#tier.markStale(keys, this.#now())
  }

  /** Once the loads under way have settled (a sent call's answer stored for the next caller), or after `waitMs`: for a shutdown. */
  async settled (waitMs: number): Promise<void> {
    await this.#flights.settled(waitMs)
  }

  close (): void {
    this.#tier.clear()
  }

  async #resolve (key: string, resource: Resource, load: Load, signal: AbortSignal | undefined, arrival: Arrival | undefined): Promise<Served> {
    // A load started because the store had nothing servable answers before the store could tell anything
    // new: a herd's later callers join it at once. (A revalidation's callers are served the stale entry,
    // and a bypass's read the store again, which may be back.)
    if (this.#flights.cause(key) === 'miss') return await this.#loaded(key, resource, load, signal, 'miss', arrival)
    let cached: CacheEntry | undefined
    try {
      cached = await this.#tier.get(key, load.wouldRefuse?.('caller', this.#deadlineAt(arrival)) !== true)
    } catch (error) {
      this.#onError(error, key, 'store')
      return await this.#loaded(key, resource, load, signal, 'bypass', arrival)
    }
    const now = this.#now()
    if (cached !== undefined && isFresh(cached, now)) return this.#hit(key, resource, cached, load, now)
    if (cached !== undefined && isServable(cached, now)) {
      this.#inBackground(key, resource, cached, load, 'revalidation')
      return { entry: cached, state: 'STALE', at: now }
    }
    return await this.#loaded(key, resource, load, signal, 'miss', arrival)
  }

  /** A fresh entry served; a hot one about to go stale is refreshed meanwhile. */
  #hit (key: string, resource: Resource, entry: CacheEntry, load: Load, now: number): Served {
    if (this.#refreshAhead.due(entry, this.#freshMs(resource, entry.status), now)) this.#inBackground(key, resource, entry, load, 'refresh-ahead')
    return { entry, state: 'HIT', at: now }
  }

  /** A load of `seen`'s key nobody waits for, unless one is under way, or one failed less than a freshness ago (held). */
  #inBackground (key: string, resource: Resource, seen: CacheEntry, load: Load, cause: 'revalidation' | 'refresh-ahead'): void {
    if (this.#holds.held(key)) return
    const since = this.#holds.since(key)
    // A failed refresh-ahead holds nothing: it comes once per version, and its entry's first stale read should revalidate.
    const hold = { ms: this.#freshMs(resource, seen.status), after: cause === 'revalidation' ? this.#holdsAfter : () => false }
    const start: StartLoad = async (loadSignal) => await inSpan('cache.load', { 'pbff.resource': resource, 'pbff.load.cause': cause }, async () =>
      await this.#load(key, resource, seen, load, loadSignal, cause, this.#now() + this.#budget.callerMs, hold))
    this.#flights.inBackground(key, start, cause, (error) => {
      // Refused by another instance's hold: kept here for what is left of it, so the next stale reads ask Redis nothing.
      if (error instanceof HeldBack) this.#holds.hold(key, since, error.remainingMs)
      else if (hold.after(error)) this.#holds.hold(key, since, hold.ms)
      // Cancelled: a caller with nothing to serve took it over before its call was sent (Flights.join).
      if (!isCancellation(error) && !(error instanceof HeldBack)) this.#onError(error, key, 'revalidate')
    })
  }

  /** The key's load in this process, joined or started, for a caller who arrived at `arrival`. */
  async #loaded (
    key: string, resource: Resource, load: Load, signal: AbortSignal | undefined, cause: 'miss' | 'bypass', arrival: Arrival | undefined
  ): Promise<Served> {
    const waitedMs = arrival?.elapsedTime ?? 0
    const deadlineAt = this.#deadlineAt(arrival)
    // A refusal known now (no token, a back-off, the budget spent) with no load to join: answered before any wait or flight.
    const refused = this.#flights.cause(key) === undefined ? load.refusesNow?.(PRIORITY_OF[cause], deadlineAt) : undefined
    if (refused !== undefined) throw refused
    // However long the load takes (another instance's, say), its caller waits no longer than its own time, from its arrival.
    const wait = withDeadline(signal, this.#budget.callerWaitMs - waitedMs)
    // A refresh under way in the background, taken over by this caller (Flights.join), may have been dropped for want
    // of budget just before: that is no answer to a caller.
    const joinsBackground = this.#flights.cause(key) === 'revalidation' || this.#flights.cause(key) === 'refresh-ahead'
    const entry = await inSpan('cache.load', { 'pbff.resource': resource, 'pbff.load.cause': cause, 'pbff.coalescer': 'owner' }, async (span) => {
      try {
        const start: StartLoad = async (loadSignal) => await this.#load(key, resource, undefined, load, loadSignal, cause, deadlineAt)
        return await this.#flights.join(key, start, cause, wait.signal, (startedIn) => {
          span.setAttribute('pbff.coalescer', 'waiter')
          linkTo(span, startedIn)
          this.#telemetry.coalescedWaiter(resource)
        })
      } catch (error) {
        // Out of time with no call sent for it (the budget holding it, say): that refusal, not a 504.
        if (isDeadline(error)) throw load.refusesNow?.(PRIORITY_OF[cause], deadlineAt) ?? new UPSTREAM_TIMEOUT(this.#budget.callerMs)
        if (!joinsBackground || isCancellation(error)) throw error
        // Its own load, at the caller's class, within what is left of its time.
        return (await this.#loaded(key, resource, load, signal, cause, arrival)).entry
      } finally {
        wait.clear()
      }
    })
    return { entry, state: cause === 'bypass' ? 'BYPASS' : 'MISS', at: this.#now() }
  }

  /**
   * A caller's load's one deadline, from its arrival, a little before its wait ends: what keeps it unsent (the budget
   * spent: 503) is then the answer; once sent, its call runs to its answer, stored for the next caller (deadline.ts).
   */
  #deadlineAt (arrival: Arrival | undefined): number {
    return this.#now() - (arrival?.elapsedTime ?? 0) + this.#budget.callerLoadMs
  }

  async #load (
    key: string, resource: Resource, seen: CacheEntry | undefined, load: Load, signal: AbortSignal, cause: FlightCause, deadlineAt: number, hold?: LoadHold
  ): Promise<CacheEntry> {
    const start: StartLoad = async (loadSignal) => await load(loadSignal, PRIORITY_OF[cause], deadlineAt)
    const refusesNow = (): Error | undefined => load.refusesNow?.(PRIORITY_OF[cause], deadlineAt)
    return await this.#loader.load(key, seen, start, signal, () => { this.#telemetry.coalescedWaiter(resource) }, refusesNow, hold)
  }

  #reported (resource: Resource, served: Served): Served {
    this.#telemetry.cacheResult(resource, served.state)
    return served
  }
}
