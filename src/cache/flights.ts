import { nobodyWaits, untilAborted } from '../cancellation.ts'
import { currentTraceparent } from '../telemetry/tracing.ts'
import type { CacheEntry } from './cache-entry.ts'

/**
 * Why a load started: the store had nothing servable (`miss`), could not be read (`bypass`), holds a stale entry
 * being served meanwhile (`revalidation`), or holds a hot entry about to go stale (`refresh-ahead`). Nobody asked
 * for the last two, so nobody leaving cancels them.
 */
export type FlightCause = 'miss' | 'bypass' | 'revalidation' | 'refresh-ahead'

/** Loads nobody waits for: they run to their end. */
type BackgroundCause = Extract<FlightCause, 'revalidation' | 'refresh-ahead'>

/** Starts the load; `signal` aborts once nobody waits for it any more. */
export type StartLoad = (signal: AbortSignal) => Promise<CacheEntry>

/** One load of a key in this process, shared by its callers. */
interface Flight {
  promise: Promise<CacheEntry>
  /** Aborts the load once its last caller has left. */
  controller: AbortController
  /** Callers waiting for it, less those that left. */
  waiters: number
  cause: FlightCause
  /** The span of the caller that started it (when traced): the span its joiners link to. */
  startedIn: string | undefined
}

/**
 * One load per key at a time in this process. Callers join the load under way; each waits until it
 * settles or its own signal aborts, and the last caller to leave cancels it (a revalidation runs to its end).
 */
export class Flights {
  readonly #inFlight = new Map<string, Flight>()

  cause (key: string): FlightCause | undefined {
    return this.#inFlight.get(key)?.cause
  }

  /** The key's load, joined or started; `joined` hears of a caller that found one under way, and the `traceparent` of its starter's span. */
  async join (
    key: string, start: StartLoad, cause: FlightCause, signal: AbortSignal | undefined, joined: (startedIn: string | undefined) => void
  ): Promise<CacheEntry> {
    // A caller already gone (a batch's later members) starts no load and joins none.
    signal?.throwIfAborted()
    let flight = this.#inFlight.get(key)
    if (flight === undefined) flight = this.#start(key, start, cause)
    else joined(flight.startedIn)
    flight.waiters++
    if (signal === undefined) return await flight.promise
    try {
      return await untilAborted(flight.promise, signal)
    } catch (error) {
      if (signal.aborted) this.#leave(key, flight)
      throw error
    }
  }

  /** A load nobody waits for, unless one of the key is under way; its failure goes to `onError`. */
  inBackground (key: string, start: StartLoad, cause: BackgroundCause, onError: (error: unknown) => void): void {
    if (this.#inFlight.has(key)) return
    this.#start(key, start, cause).promise.catch(onError)
  }

  #start (key: string, start: StartLoad, cause: FlightCause): Flight {
    const controller = new AbortController()
    const flight: Flight = { promise: start(controller.signal), controller, waiters: 0, cause, startedIn: currentTraceparent() }
    this.#inFlight.set(key, flight)
    // Also handles the rejection of a load every caller has left.
    const done = (): void => { this.#forget(key, flight) }
    flight.promise.then(done, done)
    return flight
  }

  /** Later callers start their own load rather than join a cancelled one. */
  #leave (key: string, flight: Flight): void {
    if (--flight.waiters > 0 || flight.cause === 'revalidation' || flight.cause === 'refresh-ahead') return
    this.#forget(key, flight)
    flight.controller.abort(nobodyWaits('every caller of this load went away'))
  }

  #forget (key: string, flight: Flight): void {
    if (this.#inFlight.get(key) === flight) this.#inFlight.delete(key)
  }
}
