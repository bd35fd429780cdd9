import type { Dispatcher } from 'undici'
import { withDeadline, type Deadline } from '../../cancellation.ts'
import { callOf, Forward, signalOf, type Controller, type Headers, type Interceptor } from './edge-call.ts'

export interface DeadlineOptions {
  /** A caller's whole wait: queue, token, request and body. */
  callerMs: number
  now: () => number
}

/**
 * The caller's time, outermost: the signal passed in ("nobody waits any more") combined once with the deadline,
 * for every interceptor inside, and the deadline on the app's clock, for the queue. When the signal aborts, so
 * does the request on the wire, its body included.
 */
export function deadline ({ callerMs, now }: DeadlineOptions): Interceptor {
  return (dispatch) => (opts, handler) => {
    const deadline = withDeadline(signalOf(opts), callerMs)
    callOf(opts).deadlineAt = now() + callerMs
    return dispatch({ ...opts, signal: deadline.signal } as Dispatcher.DispatchOptions, new Bounded(handler, deadline))
  }
}

class Bounded extends Forward {
  readonly #signal: AbortSignal
  readonly #clear: () => void
  #controller: Controller | undefined

  constructor (handler: Dispatcher.DispatchHandler, { signal, clear }: Deadline) {
    super(handler)
    this.#signal = signal
    this.#clear = clear
    signal.addEventListener('abort', this.#abort)
  }

  readonly #abort = (): void => {
    this.#controller?.abort(this.#signal.reason as Error)
  }

  // Each attempt (a connection retry, the retry after a 401) starts with its own controller.
  override onRequestStart (controller: Controller, context: unknown): void {
    this.#controller = controller
    if (this.#signal.aborted) controller.abort(this.#signal.reason as Error)
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
    this.#signal.removeEventListener('abort', this.#abort)
    this.#clear()
  }
}
