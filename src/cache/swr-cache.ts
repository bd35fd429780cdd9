import { isFresh, isServable, sameVersion, type CacheEntry, type CacheState } from './cache-entry.ts'
import type { Claim } from '../redis/owner-lock.ts'
import type { CacheStore, PurgeMark } from './store.ts'
import type { Resource } from '../resources.ts'
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.ts'
import { untilAborted } from '../until-aborted.ts'

export interface Served {
  entry: CacheEntry
  state: CacheState
  /** When the cache decided: what is left of freshness, and the entry's age, count from here. */
  at: number
}

/** Loads an entry; `signal` aborts when nobody waits for it any more. */
export type Load = (signal: AbortSignal) => Promise<CacheEntry>

/** The signal of a caller going away, made on first call (only a caller that must wait for a load asks). */
export type CallerSignal = () => AbortSignal

/**
 * Why a load started: the store had nothing servable (`miss`), could not be read (`bypass`), or holds a
 * stale entry being served meanwhile (`revalidation`: nobody asked for it, so nobody leaving cancels it).
 */
type FlightCause = 'miss' | 'bypass' | 'revalidation'

/** One load of a key in this process, shared by its callers. */
interface Flight {
  promise: Promise<CacheEntry>
  /** Aborts the load once its last caller has left. */
  controller: AbortController
  /** Callers waiting for it, less those that left. */
  waiters: number
  cause: FlightCause
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
 * (BYPASS), still shared in this process. A caller that goes away stops waiting at once; a load whose
 * callers have all gone is cancelled and stores nothing (a background revalidation runs to its end).
 */
export class SwrCache {
  readonly #store: CacheStore
  readonly #coalescer: SwrCacheOptions['coalescer']
  readonly #now: () => number
  readonly #telemetry: NonNullable<SwrCacheOptions['telemetry']>
  readonly #onError: SwrCacheOptions['onError']
  readonly #inFlight = new Map<string, Flight>()

  constructor (options: SwrCacheOptions) {
    this.#store = options.store
    this.#coalescer = options.coalescer
    this.#now = options.now ?? Date.now
    this.#telemetry = options.telemetry ?? noTelemetry
    this.#onError = options.onError
  }

  /** `callerSignal` (absent: a caller that never leaves) is asked for only when the caller must wait for a load. */
  async get (key: string, resource: Resource, load: Load, callerSignal?: CallerSignal): Promise<Served> {
    const served = await this.#serve(key, resource, load, callerSignal)
    this.#telemetry.cacheResult(resource, served.state)
    return served
  }

  /**
   * A fresh entry this process holds, served at once as a HIT: no I/O and no promise, the path most
   * requests take. Undefined when `get` must decide (the entry is elsewhere, stale or missing).
   */
  held (key: string, resource: Resource): Served | undefined {
    const entry = this.#store.peek?.(key)
    const now = this.#now()
    if (entry === undefined || !isFresh(entry, now)) return undefined
    this.#telemetry.cacheResult(resource, 'HIT')
    return { entry, state: 'HIT', at: now }
  }

  /** Purge: the entries become stale everywhere, so the next read serves them and revalidates once. */
  async markStale (keys: readonly string[]): Promise<number> {
    return await this.#store.markStale(keys, this.#now())
  }

  async #serve (key: string, resource: Resource, load: Load, callerSignal: CallerSignal | undefined): Promise<Served> {
    // A load started because the store had nothing servable answers before the store could tell anything
    // new: a herd's later callers join it at once. (A revalidation's callers are served the stale entry,
    // and a bypass's read the store again, which may be back.)
    if (this.#inFlight.get(key)?.cause === 'miss') return { entry: await this.#wait(key, resource, load, callerSignal, 'miss'), state: 'MISS', at: this.#now() }
    let cached: CacheEntry | undefined
    try {
      cached = await this.#store.get(key)
    } catch (error) {
      this.#onError(error, key, 'store')
      const entry = await this.#wait(key, resource, load, callerSignal, 'bypass')
      return { entry, state: 'BYPASS', at: this.#now() }
    }
    const now = this.#now()
    if (cached !== undefined && isFresh(cached, now)) return { entry: cached, state: 'HIT', at: now }
    if (cached !== undefined && isServable(cached, now)) {
      if (!this.#inFlight.has(key)) {
        this.#start(key, resource, cached, load, 'revalidation').promise.catch((error: unknown) => this.#onError(error, key, 'revalidate'))
      }
      return { entry: cached, state: 'STALE', at: now }
    }
    const entry = await this.#wait(key, resource, load, callerSignal, 'miss')
    return { entry, state: 'MISS', at: this.#now() }
  }

  /** One load per key at a time in this process: later callers wait for the first one's, each until it goes away. */
  async #wait (key: string, resource: Resource, load: Load, callerSignal: CallerSignal | undefined, cause: FlightCause): Promise<CacheEntry> {
    // A caller already gone (a batch's later members) starts no load and joins none.
    const gone = callerSignal?.()
    gone?.throwIfAborted()
    let flight = this.#inFlight.get(key)
    if (flight === undefined) flight = this.#start(key, resource, undefined, load, cause)
    else this.#telemetry.coalescedWaiter(resource)
    flight.waiters++
    if (gone === undefined) return await flight.promise
    try {
      return await untilAborted(flight.promise, gone)
    } catch (error) {
      if (gone.aborted) this.#leave(key, flight)
      throw error
    }
  }

  #start (key: string, resource: Resource, seen: CacheEntry | undefined, load: Load, cause: FlightCause): Flight {
    const controller = new AbortController()
    const promise = this.#loadShared(key, resource, seen, load, controller.signal)
    const flight: Flight = { promise, controller, waiters: 0, cause }
    this.#inFlight.set(key, flight)
    // Also handles the rejection of a load every caller has left.
    const done = (): void => { this.#forget(key, flight) }
    promise.then(done, done)
    return flight
  }

  /** The last caller to leave cancels the load; later callers start their own rather than join a cancelled one. */
  #leave (key: string, flight: Flight): void {
    if (--flight.waiters > 0 || flight.cause === 'revalidation') return
    this.#forget(key, flight)
    flight.controller.abort(new DOMException('every caller of this load went away', 'AbortError'))
  }

  #forget (key: string, flight: Flight): void {
    if (this.#inFlight.get(key) === flight) this.#inFlight.delete(key)
  }

  /**
   * One load per key across instances. `seen` is what this instance found (a stale entry or nothing):
   * a fresh entry, or another version, in the store means another instance has loaded it meanwhile.
   * A waiter woken with nothing new claims again rather than loading at once: what woke it may be the
   * late release of an earlier lock while another instance's load is still running. After
   * `maxClaims` waits it loads on its own (each wait is bounded by the lock's lifetime).
   */
  async #loadShared (key: string, resource: Resource, seen: CacheEntry | undefined, load: Load, signal: AbortSignal): Promise<CacheEntry> {
    const coalescer = this.#coalescer
    if (coalescer === undefined) return await this.#loadAndStore(key, load, signal, this.#purgeMark(key))
    for (let attempt = 1; ; attempt++) {
      // The look for another instance's fill and the purge mark go out right behind the claim, on its
      // connection, so Redis runs them after it: one round trip where three waited on each other.
      const claiming = coalescer.claim(key)
      const looking = this.#loadedElsewhere(key, seen)
      const marking = this.#purgeMark(key)
      const claim = await claiming
      if (claim === undefined) return await this.#loadAndStore(key, load, signal, marking)
      if (claim.owner) {
        try {
          // The previous owner may have finished between our read and our lock.
          return await looking ?? await this.#loadAndStore(key, load, signal, marking)
        } finally {
          // Also when cancelled, so the other instances' waiters move on. Callers need not wait for the
          // release: it reports its own failures, and the lock expires anyway.
          claim.release().catch(() => {})
        }
      }
      if (attempt === 1) this.#telemetry.coalescedWaiter(resource)
      await untilAborted(claim.settled, signal)
      const loaded = await this.#loadedElsewhere(key, seen)
      if (loaded !== undefined) return loaded
      if (attempt >= coalescer.maxClaims) return await this.#loadAndStore(key, load, signal, this.#purgeMark(key))
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

  /** Read before the upstream is asked, so that a purge after it stores the fill stale; unread, the store takes a purge it remembers as later. */
  async #purgeMark (key: string): Promise<PurgeMark | undefined> {
    return await this.#store.purgeMark(key).catch((error: unknown) => { this.#onError(error, key, 'store'); return undefined })
  }

  async #loadAndStore (key: string, load: Load, signal: AbortSignal, marking: Promise<PurgeMark | undefined>): Promise<CacheEntry> {
    const mark = await marking
    // Its callers may have gone during that read.
    signal.throwIfAborted()
    const entry = await load(signal)
    // A store that is away costs the cache, never the caller.
    await this.#store.set(key, entry, mark).catch((error: unknown) => this.#onError(error, key, 'store'))
    return entry
  }
}
