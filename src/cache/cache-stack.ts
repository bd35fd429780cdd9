import { isCancellation, isDeadline, withDeadline } from '../cancellation.ts'
import { UPSTREAM_TIMEOUT } from '../errors.ts'
import type { Arrival, LoadBudget } from '../load-budget.ts'
import type { CacheState, Priority, Resource } from '../resources.ts'
import type { RedisBus } from '../redis/bus.ts'
import type { Claim } from '../redis/owner-lock.ts'
import type { Telemetry } from '../telemetry/telemetry.ts'
import { inSpan, linkTo } from '../telemetry/tracing.ts'
import { isFresh, isServable, type CacheEntry } from './cache-entry.ts'
import type { CacheDriver, Tier } from './driver.ts'
import { Flights, type FlightCause, type StartLoad } from './flights.ts'
import { Loader } from './loader.ts'
import { MemoryDriver } from './memory-driver.ts'
import { NearCopies, type NearCopiesOptions } from './near-copies.ts'
import { RefreshAhead, type RefreshAheadOptions } from './refresh-ahead.ts'
import { SharedTier } from './shared-tier.ts'

export interface Served {
  entry: CacheEntry
  state: CacheState
  /** When the cache decided: what is left of freshness, and the entry's age, count from here. */
  at: number
}

/**
 * Loads an entry; `signal` aborts when nobody waits for it any more, `priority` says who waits (for the fleet's upstream
 * budget), `deadlineAt` (the app's clock) is when the caller that started it gives up, if one did.
 */
export type Load = (signal: AbortSignal, priority: Priority, deadlineAt?: number) => Promise<CacheEntry>

/** A load's priority, from why it started: a caller with nothing to serve waits on a miss or a bypass, nobody on a revalidation. */
const PRIORITY_OF: Record<FlightCause, Priority> = { miss: 'caller', bypass: 'caller', revalidation: 'background', 'refresh-ahead': 'refresh-ahead' }

/** Where a cache failure happened: a background revalidation, or the store (read, write, purge). */
export type CacheFailure = 'revalidate' | 'store'

export interface CacheStackOptions {
  /** Bounds of this process's store: the whole cache without Redis, and this instance's own while Redis is away. */
  memory?: { maxEntries?: number, maxBytes?: number }
  /** Redis, the bus the instances tell each other on, and the lock that elects one loader per key; absent: in-process only. */
  shared?: {
    driver: CacheDriver
    bus: Pick<RedisBus, 'ready' | 'listen' | 'publish'>
    claim: (key: string) => Promise<Claim | undefined>
    copies?: Omit<NearCopiesOptions, 'now'>
  }
  budget: Pick<LoadBudget, 'purgeMemoryMs' | 'maxClaims' | 'callerWaitMs' | 'callerLoadMs' | 'callerMs'>
  /** When a hot entry is refreshed before it goes stale (see RefreshAhead). */
  refreshAhead?: RefreshAheadOptions
  now: () => number
  telemetry: Pick<Telemetry, 'cacheResult' | 'coalescedWaiter'>
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
 * whose signal aborts stops waiting at once; a load its callers have all left is cancelled and stores nothing.
 */
export class CacheStack {
  readonly #tier: Tier
  readonly #loader: Loader
  readonly #flights = new Flights()
  readonly #refreshAhead: RefreshAhead
  readonly #budget: CacheStackOptions['budget']
  readonly #now: () => number
  readonly #telemetry: CacheStackOptions['telemetry']
  readonly #onError: CacheStackOptions['onError']

  constructor ({ memory, shared, budget, refreshAhead, now, telemetry, onError }: CacheStackOptions) {
    const local = new MemoryDriver({ ...memory, purgeMemoryMs: budget.purgeMemoryMs, now })
    this.#tier = shared === undefined
      ? local
      : new SharedTier({
        driver: shared.driver,
        bus: shared.bus,
        copies: new NearCopies({ ...shared.copies, now }),
        alone: local,
        onError: (error, key) => { onError(error, key, 'store') }
      })
    this.#loader = new Loader({
      tier: this.#tier,
      locks: shared === undefined ? undefined : { claim: shared.claim, maxClaims: budget.maxClaims },
      now,
      onStoreError: (error, key) => { onError(error, key, 'store') }
    })
    this.#refreshAhead = new RefreshAhead(refreshAhead)
    this.#budget = budget
    this.#now = now
    this.#telemetry = telemetry
    this.#onError = onError
  }

  /** `signal` aborts when the caller goes away (absent: a caller that never leaves); its time counts from `arrival` (absent: now). */
  lookup (key: string, resource: Resource, load: Load, signal?: AbortSignal, arrival?: Arrival): Served | Promise<Served> {
    const now = this.#now()
    const held = this.#tier.held(key)
    if (held !== undefined && isFresh(held, now)) return this.#reported(resource, this.#hit(key, resource, held, load, now))
    return inSpan('cache.lookup', { 'pbff.resource': resource }, async (span) => {
      const served = await this.#resolve(key, resource, load, signal, arrival)
      span.setAttribute('pbff.cache.state', served.state)
      return this.#reported(resource, served)
    })
  }

  /** Purge: the entries become stale everywhere, so the next read serves them and revalidates once. */
  async markStale (keys: readonly string[]): Promise<number> {
    return await this.#tier.markStale(keys, this.#now())
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
      cached = await this.#tier.get(key)
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
    if (this.#refreshAhead.due(entry, now)) this.#inBackground(key, resource, entry, load, 'refresh-ahead')
    return { entry, state: 'HIT', at: now }
  }

  /** A load of `seen`'s key nobody waits for, unless one is under way. */
  #inBackground (key: string, resource: Resource, seen: CacheEntry, load: Load, cause: 'revalidation' | 'refresh-ahead'): void {
    const start: StartLoad = async (loadSignal) => await inSpan('cache.load', { 'pbff.resource': resource, 'pbff.load.cause': cause }, async () =>
      await this.#load(key, resource, seen, load, loadSignal, cause))
    this.#flights.inBackground(key, start, cause, (error) => {
      this.#onError(error, key, 'revalidate')
    })
  }

  /** The key's load in this process, joined or started, for a caller who arrived at `arrival`. */
  async #loaded (
    key: string, resource: Resource, load: Load, signal: AbortSignal | undefined, cause: 'miss' | 'bypass', arrival: Arrival | undefined
  ): Promise<Served> {
    const waitedMs = arrival?.elapsedTime ?? 0
    // However long the load takes (another instance's, say), its caller waits no longer than its own time, from its
    // arrival; a load it starts ends a little earlier, so that what stopped it (the budget spent: 503) is the answer.
    const wait = withDeadline(signal, this.#budget.callerWaitMs - waitedMs)
    const loadMs = this.#budget.callerLoadMs - waitedMs
    // A refresh under way in the background may be dropped for want of budget: that is no answer to a caller.
    const joinsBackground = this.#flights.cause(key) === 'revalidation' || this.#flights.cause(key) === 'refresh-ahead'
    const entry = await inSpan('cache.load', { 'pbff.resource': resource, 'pbff.load.cause': cause, 'pbff.coalescer': 'owner' }, async (span) => {
      try {
        const start: StartLoad = async (loadSignal) => {
          const bounded = withDeadline(loadSignal, loadMs)
          try {
            return await this.#load(key, resource, undefined, load, bounded.signal, cause, this.#now() + loadMs)
          } finally {
            bounded.clear()
          }
        }
        return await this.#flights.join(key, start, cause, wait.signal, (startedIn) => {
          span.setAttribute('pbff.coalescer', 'waiter')
          linkTo(span, startedIn)
          this.#telemetry.coalescedWaiter(resource)
        })
      } catch (error) {
        if (isDeadline(error)) throw new UPSTREAM_TIMEOUT(this.#budget.callerMs)
        if (!joinsBackground || isCancellation(error)) throw error
        // Its own load, at the caller's class, within what is left of its time.
        return (await this.#loaded(key, resource, load, signal, cause, arrival)).entry
      } finally {
        wait.clear()
      }
    })
    return { entry, state: cause === 'bypass' ? 'BYPASS' : 'MISS', at: this.#now() }
  }

  async #load (
    key: string, resource: Resource, seen: CacheEntry | undefined, load: Load, signal: AbortSignal, cause: FlightCause, deadlineAt?: number
  ): Promise<CacheEntry> {
    const start: StartLoad = async (loadSignal) => await load(loadSignal, PRIORITY_OF[cause], deadlineAt)
    return await this.#loader.load(key, seen, start, signal, () => { this.#telemetry.coalescedWaiter(resource) })
  }

  #reported (resource: Resource, served: Served): Served {
    this.#telemetry.cacheResult(resource, served.state)
    return served
  }
}
