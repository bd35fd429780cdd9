import { interceptors, type Dispatcher } from 'undici'
import { readUpstreamProfile, readUpstreamTimeline, type ProfileResponse, type TimelineResponse } from '../schemas/profile.ts'
import type { Priority, Resource } from '../resources.ts'
import type { BreakerState, Telemetry, UpstreamOutcome } from '../telemetry/telemetry.ts'
import { inSpan } from '../telemetry/tracing.ts'
import type { BackoffWindow } from './backoff-window.ts'
import type { BudgetRate } from './budget/fleet-source.ts'
import type { UpstreamBudget } from './budget/upstream-budget.ts'
import type { CircuitBreaker } from './circuit-breaker.ts'
import type { ConcurrencyLimiter } from './concurrency-limiter.ts'
import { contractError, EdgeFailure, outcomeOf } from './edge-errors.ts'
import { backoff } from './interceptors/backoff.ts'
import { breaker } from './interceptors/breaker.ts'
import { budget } from './interceptors/budget.ts'
import { concurrency } from './interceptors/concurrency.ts'
import { deadline } from './interceptors/deadline.ts'
import type { EdgeCall, EdgeOptions } from './interceptors/edge-call.ts'
import { sent } from './interceptors/sent.ts'
import { token, type TokenOptions } from './interceptors/token.ts'
import type { UpstreamLog } from './log.ts'
import type { RecentLatency } from './recent-latency.ts'
import { CONNECTION_CODES } from './transport-errors.ts'

/** What a lookup found: the validated body, or that the upstream has no such member. */
export type UpstreamAnswer<T> = { found: true, body: T } | { found: false }

export interface UpstreamClientOptions extends TokenOptions {
  /** Dispatcher bound to the upstream's origin (its Pool). */
  dispatcher: Dispatcher
  /** Path of UPSTREAM_BASE_URL (kept, routes appended), without a trailing slash. */
  basePath: string
  /** A caller's whole wait: the queue, the token, the request and its body (loadBudget's callerMs). */
  callerMs: number
  limiter: ConcurrencyLimiter
  latency: RecentLatency
  breaker: CircuitBreaker
  backoff: BackoffWindow
  /** The fleet's upstream budget (UPSTREAM_MAX_RPS): every call passes it before it queues for a slot. */
  budget: UpstreamBudget
  telemetry: Pick<Telemetry, 'upstreamCall'>
  log: UpstreamLog
  now: () => number
}

/** The one retry of a GET whose connection failed before any answer, after this pause; a 5xx is an answer, never retried. */
const retryOnceAfterConnectionError = interceptors.retry({
  maxRetries: 1,
  minTimeout: 100,
  methods: ['GET'],
  statusCodes: [],
  errorCodes: [...CONNECTION_CODES]
})

/**
 * One typed method per upstream resource, over the origin's pool composed with the edge's interceptors (outermost
 * first): the caller's deadline, the circuit breaker, the fleet's budget, the slots and their queue, the back-off
 * window, the token and its one retry after a 401, then the connection retry. Whatever ends a call becomes the contract's error in one
 * place (edge-errors.ts), and is reported here once.
 */
export class UpstreamClient {
  readonly #options: UpstreamClientOptions
  readonly #dispatcher: Dispatcher

  constructor (options: UpstreamClientOptions) {
    this.#options = options
    const { callerMs, now } = options
    // compose() wraps in order: the first listed is the innermost.
    this.#dispatcher = options.dispatcher.compose(
      retryOnceAfterConnectionError,
      sent({ now }),
      token(options),
      backoff({ window: options.backoff, budget: options.budget, now }),
      concurrency({ limiter: options.limiter, latency: options.latency, callerMs, now }),
      budget({ budget: options.budget, latency: options.latency, now }),
      breaker({ breaker: options.breaker, callerMs, now }),
      deadline({ callerMs, now })
    )
  }

  get breakerState (): BreakerState {
    return this.#options.breaker.state
  }

  get backoffRemainingMs (): number {
    return this.#options.backoff.remainingMs
  }

  /** The fleet's effective budget now (halved after a 429, recovering); undefined when unlimited. */
  get budgetRate (): BudgetRate | undefined {
    return this.#options.budget.rate()
  }

  /**
   * `signal` aborts the call when nobody waits for its answer any more; `priority` is why it is made;
   * `callerDeadlineAt` (the app's clock), when its caller gives up, for the budget's wait.
   */
  async profile (username: string, signal?: AbortSignal, priority: Priority = 'caller', callerDeadlineAt?: number): Promise<UpstreamAnswer<ProfileResponse>> {
    return await this.#get('profile', `/profile/${encodeURIComponent(username)}`, readUpstreamProfile, signal, { priority, callerDeadlineAt })
  }

  async timeline (username: string, signal?: AbortSignal, priority: Priority = 'caller', callerDeadlineAt?: number): Promise<UpstreamAnswer<TimelineResponse>> {
    return await this.#get('timeline', `/profile/${encodeURIComponent(username)}/timeline`, readUpstreamTimeline, signal, { priority, callerDeadlineAt })
  }

  async #get<T> (
    resource: Resource, path: string, read: (body: unknown) => T | undefined, signal: AbortSignal | undefined,
    { priority, callerDeadlineAt }: { priority: Priority, callerDeadlineAt: number | undefined }
  ): Promise<UpstreamAnswer<T>> {
    const call: EdgeCall = { priority, deadlineAt: Infinity, ...(callerDeadlineAt !== undefined && { callerDeadlineAt }) }
    // The call through the whole edge (queue, token, retries); undici's instrumentation adds the request on the wire.
    return await inSpan('upstream.call', { 'pbff.resource': resource, 'pbff.priority': priority }, async (span) => {
      try {
        const answer = await this.#answer(path, read, call, signal)
        this.#report(resource, call, answer.found ? 'ok' : 'not_found')
        span.setAttribute('pbff.upstream.outcome', answer.found ? 'ok' : 'not_found')
        return answer
      } catch (error) {
        span.setAttribute('pbff.upstream.outcome', outcomeOf(error, signal))
        throw this.#failed(resource, call, error, signal)
      }
    })
  }

  async #answer<T> (path: string, read: (body: unknown) => T | undefined, call: EdgeCall, signal: AbortSignal | undefined): Promise<UpstreamAnswer<T>> {
    const options: EdgeOptions & Dispatcher.RequestOptions = {
      method: 'GET',
      path: this.#options.basePath + path,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      call,
      ...(signal !== undefined && { signal })
    }
    const { statusCode, body } = await this.#dispatcher.request(options)
    if (statusCode !== 200) {
      await body.dump()
      if (statusCode === 404) return { found: false }
      throw new EdgeFailure({ kind: 'status', status: statusCode })
    }
    const valid = read(await body.json())
    if (valid === undefined) throw new EdgeFailure({ kind: 'invalid' })
    return { found: true, body: valid }
  }

  /** The caller's error for a call that failed, reported once; a call never sent for want of a token is the token's failure. */
  #failed (resource: Resource, call: EdgeCall, error: unknown, signal: AbortSignal | undefined): Error {
    const outcome = outcomeOf(error, signal)
    if (call.sentAt !== undefined) this.#report(resource, call, outcome)
    else if (outcome !== 'auth_refused') this.#report(resource, call, 'short_circuited')
    const coded = contractError(error, signal, this.#options.callerMs)
    if (call.sentAt !== undefined && outcome !== 'cancelled') {
      this.#options.log.warn({ err: coded, resource, outcome }, 'upstream call failed')
    }
    return coded
  }

  #report (resource: Resource, call: EdgeCall, outcome: UpstreamOutcome): void {
    const seconds = call.sentAt === undefined ? 0 : (this.#options.now() - call.sentAt) / 1000
    this.#options.telemetry.upstreamCall(resource, outcome, seconds)
  }
}
