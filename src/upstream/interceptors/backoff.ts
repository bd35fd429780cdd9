import type { Dispatcher } from 'undici'
import { EdgeFailure } from '../edge-errors.ts'
import type { BackoffWindow } from '../backoff-window.ts'
import type { UpstreamBudget } from '../budget/upstream-budget.ts'
import { fail, Forward, type Controller, type Headers, type Interceptor } from './edge-call.ts'

/** Upper bound for a Retry-After we honour, so a bogus header cannot silence us for days. */
export const MAX_RETRY_AFTER_SECONDS = 300
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
    if (statusCode === 429 || (statusCode === 503 && retryAfter !== undefined)) this.#seconds = retryAfterSeconds(retryAfter, headers.date)
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

/**
 * Retry-After in seconds or as an HTTP date, capped; a missing or unreadable one means a short pause. A date is read
 * against the answer's own `Date` (the upstream's clock, RFC 9110), else the host's wall clock: never the app's
 * steady clock, which a step of the host's clock since the start leaves apart from wall time.
 */
function retryAfterSeconds (header: string | string[] | undefined, date: string | string[] | undefined): number {
  const value = Array.isArray(header) ? header[0] : header
  if (value === undefined) return DEFAULT_RETRY_AFTER_SECONDS
  const answeredAt = typeof date === 'string' ? Date.parse(date) : Number.NaN
  const seconds = /^\d+$/.test(value.trim()) ? Number(value) : (Date.parse(value) - (Number.isNaN(answeredAt) ? Date.now() : answeredAt)) / 1000
  if (!Number.isFinite(seconds)) return DEFAULT_RETRY_AFTER_SECONDS
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(seconds)))
}
