import { setTimeout as sleep } from 'node:timers/promises'
import { isCancellation, nobodyWaits, untilAborted } from '../cancellation.ts'
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

function isBackground (cause: FlightCause): cause is BackgroundCause {
  return cause === 'revalidation' || cause === 'refresh-ahead'
}

/** Starts the load; `signal` aborts once nobody waits for it any more. */
export type StartLoad = (signal: AbortSignal) => Promise<CacheEntry>

/** One load of a key in this process, shared by its callers. */
interface Flight {
  promise: Promise<CacheEntry>
  /** Aborts once its last caller has left: the load drops its call if not yet sent, else runs on. */
  controller: AbortController
  /** Callers waiting for it, less those that left. */
  waiters: number
  cause: FlightCause
  /** The span of the caller that started it (when traced): the span its joiners link to. */
  startedIn: string | undefined
}

/**
 * One load per key at a time in this process. Callers join the load under way; each waits until it
 * settles or its own signal aborts, and the last caller to leave tells it nobody waits (a revalidation
 * runs to its end regardless). A load whose call is sent runs on and is joined by later callers.
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
    else {
      // A caller does not wait behind a load queued at the background's class: unsent, it is dropped and this caller's
      // load starts in its place (below); sent, its answer serves.
      if (isBackground(flight.cause) && !isBackground(cause)) flight.controller.abort(nobodyWaits('a caller took this load over'))
      joined(flight.startedIn)
    }
    flight.waiters++
    try {
      return signal === undefined ? await flight.promise : await untilAborted(flight.promise, signal)
    } catch (error) {
      if (signal?.aborted === true) this.#leave(flight)
      else if (flight.controller.signal.aborted && isCancellation(error)) {
        // Joined after its callers had all left, and dropped unsent for that: this caller loads anew.
        this.#forget(key, flight)
        return await this.join(key, start, cause, signal, () => {})
      }
      throw error
    }
  }

  /** Resolves once every load under way has settled, or after `waitMs`. */
  async settled (waitMs: number): Promise<void> {
    const loads = [...this.#inFlight.values()].map(async ({ promise }) => await promise.then(() => {}, () => {}))
    // None under way: no timer to set and abort (an abort's error costs its stack trace).
    if (loads.length === 0) return
    const giveUp = new AbortController()
    await Promise.race([Promise.all(loads), sleep(waitMs, undefined, { signal: giveUp.signal, ref: false }).catch(() => {})])
    giveUp.abort()
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

  /** Kept for later callers: a load whose call was sent answers them; one dropped unsent sends them to load anew (join). */
  #leave (flight: Flight): void {
    if (--flight.waiters > 0 || isBackground(flight.cause)) return
    flight.controller.abort(nobodyWaits('every caller of this load went away'))
  }

  #forget (key: string, flight: Flight): void {
    if (this.#inFlight.get(key) === flight) this.#inFlight.delete(key)
  }
}
