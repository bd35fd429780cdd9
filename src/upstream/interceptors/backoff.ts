import type { Dispatcher } from 'undici'
import { EdgeFailure } from '../edge-errors.ts'
import type { BackoffWindow } from '../backoff-window.ts'
import type { UpstreamBudget } from '../budget/upstream-budget.ts'
import { fail, Forward, type Controller, type Headers, type Interceptor } from './edge-call.ts'
import { retryAfterSeconds } from '../retry-after.ts'

/** A request to slow down with no Retry-After we can read: a short pause. */
const DEFAULT_RETRY_AFTER_SECONDS = 5

export interface BackoffOptions {
  window: BackoffWindow
  /** Halved by a 429, fleet-wide. */
  budget: Pick<UpstreamBudget, 'slowDown'>
}

/**
 * Honours the upstream's "slow down": inside the queue, so that a call is checked against the window (the other
 * instances' included, as the bus told them: no Redis command) when its slot comes, right before it would be sent. A 429, or a 503 with Retry-After, opens the
 * window for every instance, halves the fleet's budget, and ends the call as `rate_limited`, its body read and dropped.
 */
export function backoff (options: BackoffOptions): Interceptor {
  return (dispatch) => (opts, handler) => {
    const remainingMs = options.window.check()
    if (remainingMs > 0) {
      fail(handler, new EdgeFailure({ kind: 'backoff', retryInMs: remainingMs }))
      return true
    }
    return dispatch(opts, new SlowDown(handler, options))
  }
}

class SlowDown extends Forward {
  readonly #options: BackoffOptions
  /** Set while the answer is a request to slow down: its body is dropped. */
  #seconds: number | undefined

  constructor (handler: Dispatcher.DispatchHandler, options: BackoffOptions) {
    super(handler)
    this.#options = options
  }

  override onResponseStart (controller: Controller, statusCode: number, headers: Headers, statusMessage?: string): void {
    const retryAfter = headers['retry-after']
    if (statusCode === 429 || (statusCode === 503 && retryAfter !== undefined)) this.#seconds = retryAfterSeconds(headers) ?? DEFAULT_RETRY_AFTER_SECONDS
    else super.onResponseStart(controller, statusCode, headers, statusMessage)
  }

  override onResponseData (controller: Controller, chunk: Buffer): void {
    if (this.#seconds === undefined) super.onResponseData(controller, chunk)
  }

  override onResponseEnd (controller: Controller, trailers: Headers): void {
    const seconds = this.#seconds
    if (seconds === undefined) return super.onResponseEnd(controller, trailers)
    // The window is open and the budget halved (for the other instances too) before the caller hears of it.
    const end = (): void => { super.onResponseError(controller, new EdgeFailure({ kind: 'rate_limited', seconds })) }
    Promise.all([this.#options.window.open(seconds * 1000), this.#options.budget.slowDown(seconds * 1000)]).then(end, end)
  }
}
