import type { Dispatcher } from 'undici'
import { EdgeFailure, outcomeOf, upstreamFailed } from '../edge-errors.ts'
import type { CircuitBreaker, Permit } from '../circuit-breaker.ts'
import { callOf, fail, Forward, signalOf, type Controller, type EdgeCall, type Headers, type Interceptor } from './edge-call.ts'

export interface BreakerOptions {
  breaker: CircuitBreaker
  callerMs: number
  now: () => number
}

/**
 * Outside the queue, so that an open circuit refuses at once instead of after a wait for a slot. Each call it lets
 * through tells the breaker whether the upstream failed; a call never sent, or cancelled, tells it nothing.
 */
export function breaker (options: BreakerOptions): Interceptor {
  return (dispatch) => (opts, handler) => {
    const permit = options.breaker.tryAcquire()
    if (permit === undefined) {
      fail(handler, new EdgeFailure({ kind: 'breaker', retryInMs: options.breaker.retryInMs }))
      return true
    }
    return dispatch(opts, new Verdict(handler, options, permit, callOf(opts), signalOf(opts)))
  }
}

class Verdict extends Forward {
  readonly #options: BreakerOptions
  readonly #permit: Permit
  readonly #call: EdgeCall
  readonly #signal: AbortSignal | undefined
  #status = 0

  constructor (handler: Dispatcher.DispatchHandler, options: BreakerOptions, permit: Permit, call: EdgeCall, signal: AbortSignal | undefined) {
    super(handler)
    this.#options = options
    this.#permit = permit
    this.#call = call
    this.#signal = signal
  }

  override onResponseStart (controller: Controller, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.#status = statusCode
    super.onResponseStart(controller, statusCode, headers, statusMessage)
  }

  override onResponseEnd (controller: Controller, trailers: Headers): void {
    // A 404 is an answer like a 200; any other status that reaches here is the upstream failing.
    this.#options.breaker.record(this.#permit, this.#status !== 200 && this.#status !== 404)
    super.onResponseEnd(controller, trailers)
  }

  override onResponseError (controller: Controller, error: Error): void {
    const { breaker, callerMs, now } = this.#options
    const outcome = outcomeOf(error, this.#signal)
    const sentAt = this.#call.sentAt
    if (sentAt === undefined || outcome === 'cancelled') breaker.abstain(this.#permit)
    else breaker.record(this.#permit, upstreamFailed(outcome, now() - sentAt, callerMs))
    super.onResponseError(controller, error)
  }
}
