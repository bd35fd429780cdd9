import type { Dispatcher } from 'undici'
import { withDeadline, type Deadline } from '../../cancellation.ts'
import { callOf, Forward, type Controller, type EdgeCall, type Headers, type Interceptor } from './edge-call.ts'

export interface DeadlineOptions {
  /** A sent call's own limit, from when it is sent (UPSTREAM_TIMEOUT_MS). */
  callerMs: number
  now: () => number
}

/**
 * A call's time, in two parts. Until it is sent, it is dropped when no caller wants it any more (`call.unwanted`) or
 * its deadline passes (`call.deadlineAt`); once sent, only its own limit, `callerMs` from then, ends it: callers
 * leaving, or running out of time, never cut a call whose answer will fill the cache.
 */
class CallTime {
  readonly #controller = new AbortController()
  readonly #callerMs: number
  #bound: Deadline

  constructor (call: EdgeCall, { callerMs, now }: DeadlineOptions) {
    this.#callerMs = callerMs
    this.#bound = this.#follow(withDeadline(call.unwanted, call.deadlineAt - now()))
  }

  /** What every interceptor inside waits under: it aborts the request on the wire too (Bounded). */
  get signal (): AbortSignal {
    return this.#controller.signal
  }

  /** At each send: the limit of one before it (refused) goes. */
  sent (): void {
    this.#bound.clear()
    if (!this.signal.aborted) this.#bound = this.#follow(withDeadline(undefined, this.#callerMs))
  }

  clear (): void {
    this.#bound.clear()
  }

  #follow (bound: Deadline): Deadline {
    bound.signal.addEventListener('abort', () => { this.#controller.abort(bound.signal.reason) }, { once: true })
    return bound
  }
}

const times = new WeakMap<EdgeCall, CallTime>()

/** Outermost: the call's time, as a signal for every interceptor inside and for the request on the wire. */
export function deadline (options: DeadlineOptions): Interceptor {
  return (dispatch) => (opts, handler) => {
    const call = callOf(opts)
    const time = new CallTime(call, options)
    times.set(call, time)
    return dispatch({ ...opts, signal: time.signal } as Dispatcher.DispatchOptions, new Bounded(handler, time))
  }
}

/**
 * Innermost of ours: the call leaves for the wire (a connection that fails counts as sent), and its own limit starts,
 * at each send: the one after a refused token has its whole limit too, so that its answer is kept.
 */
export function sent ({ now }: { now: () => number }): Interceptor {
  return (dispatch) => (opts, handler) => {
    const call = callOf(opts)
    call.sentAt = now()
    times.get(call)?.sent()
    return dispatch(opts, handler)
  }
}

class Bounded extends Forward {
  readonly #time: CallTime
  #controller: Controller | undefined

  constructor (handler: Dispatcher.DispatchHandler, time: CallTime) {
    super(handler)
    this.#time = time
    time.signal.addEventListener('abort', this.#abort)
  }

  readonly #abort = (): void => {
    this.#controller?.abort(this.#time.signal.reason as Error)
  }

  // Each attempt (a connection retry, the retry after a 401) starts with its own controller.
  override onRequestStart (controller: Controller, context: unknown): void {
    this.#controller = controller
    if (this.#time.signal.aborted) controller.abort(this.#time.signal.reason as Error)
    else super.onRequestStart(controller, context)
  }

  override onResponseEnd (controller: Controller, trailers: Headers): void {
    this.#done()
    super.onResponseEnd(controller, trailers)
  }

  override onResponseError (controller: Controller, error: Error): void {
    this.#done()
    super.onResponseError(controller, error)
  }

  #done (): void {
    this.#time.signal.removeEventListener('abort', this.#abort)
    this.#time.clear()
  }
}
