import type { Dispatcher } from 'undici'
import { withDeadline } from '../../cancellation.ts'
import { EdgeFailure, hadFairShare, outcomeOf } from '../edge-errors.ts'
import type { ConcurrencyLimiter } from '../concurrency-limiter.ts'
import type { RecentLatency } from '../recent-latency.ts'
import { inSpan } from '../../telemetry/tracing.ts'
import { callOf, fail, Forward, sendBy, signalOf, type Controller, type EdgeCall, type Headers, type Interceptor } from './edge-call.ts'

export interface ConcurrencyOptions {
  limiter: ConcurrencyLimiter
  latency: RecentLatency
  callerMs: number
  now: () => number
}

/**
 * At most `limiter`'s slots in flight, the others queued. A call that must wait is sent only while its caller's
 * remaining time covers what the upstream has been taking (RecentLatency): past that point it leaves the queue
 * with a timeout, unsent, instead of reaching the upstream too late to be answered.
 */
export function concurrency (options: ConcurrencyOptions): Interceptor {
  return (dispatch) => (opts, handler) => {
    const call = callOf(opts)
    if (options.limiter.tryEnter()) return dispatch(opts, new Slot(handler, options, call))
    inSpan('upstream.queue', {}, async () => { await queued(options, call, signalOf(opts)) }).then(
      () => dispatch(opts, new Slot(handler, options, call)),
      (error: unknown) => { fail(handler, error) }
    )
    return true
  }
}

async function queued ({ limiter, latency, now }: ConcurrencyOptions, call: EdgeCall, signal: AbortSignal | undefined): Promise<void> {
  const lastMoment = (): number => sendBy(call, latency.expectedMs)
  if (now() >= lastMoment()) throw new EdgeFailure({ kind: 'too_late' })
  if (limiter.full) throw new EdgeFailure({ kind: 'overloaded', retryInMs: latency.expectedMs })
  const lastChance = withDeadline(signal, lastMoment() - now())
  try {
    await limiter.enter(lastChance.signal)
  } finally {
    lastChance.clear()
  }
  // Asked again on the app's clock, with what the upstream takes now: both may have moved while it waited.
  if (now() >= lastMoment()) {
    limiter.leave()
    throw new EdgeFailure({ kind: 'too_late' })
  }
}

/** Holds the slot until the answer's body is read or the call fails; learns how long the upstream takes. */
class Slot extends Forward {
  readonly #options: ConcurrencyOptions
  readonly #call: EdgeCall

  constructor (handler: Dispatcher.DispatchHandler, options: ConcurrencyOptions, call: EdgeCall) {
    super(handler)
    this.#options = options
    this.#call = call
  }

  override onResponseEnd (controller: Controller, trailers: Headers): void {
    const elapsedMs = this.#leave()
    if (elapsedMs !== undefined) this.#options.latency.record(elapsedMs)
    super.onResponseEnd(controller, trailers)
  }

  override onResponseError (controller: Controller, error: Error): void {
    const elapsedMs = this.#leave()
    // A timeout after a fair share of the time says the upstream takes at least that long; other failures say nothing.
    if (elapsedMs !== undefined && outcomeOf(error, undefined) === 'timeout' && hadFairShare(elapsedMs, this.#options.callerMs)) {
      this.#options.latency.record(elapsedMs)
    }
    super.onResponseError(controller, error)
  }

  /** Gives the slot back; how long the call was out, if it was sent. */
  #leave (): number | undefined {
    this.#options.limiter.leave()
    const { sentAt } = this.#call
    return sentAt === undefined ? undefined : this.#options.now() - sentAt
  }
}
