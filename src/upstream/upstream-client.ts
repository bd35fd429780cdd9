import { interceptors, type Dispatcher } from 'undici'
import { withoutStack } from '../errors.ts'
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
import { deadline, sent } from './interceptors/deadline.ts'
import { sendBy, type EdgeCall, type EdgeOptions } from './interceptors/edge-call.ts'
import { token, type TokenOptions } from './interceptors/token.ts'
import type { UpstreamLog } from './log.ts'
import type { RecentLatency } from './recent-latency.ts'
import type { TokenManager } from './token-manager.ts'
import { CONNECTION_CODES } from './transport-errors.ts'

/** What a lookup found: the validated body, or that the upstream has no such member. */
export type UpstreamAnswer<T> = { found: true, body: T } | { found: false }

export interface UpstreamClientOptions extends Omit<TokenOptions, 'tokens'> {
  tokens: TokenOptions['tokens'] & Pick<TokenManager, 'refusesNow' | 'refusing'>
  /** Dispatcher bound to the upstream's origin (its Pool). */
  dispatcher: Dispatcher
  /** Path of UPSTREAM_BASE_URL (kept, routes appended), without a trailing slash. */
  basePath: string
  /** A sent call's own limit, from when it is sent (loadBudget's callerMs, UPSTREAM_TIMEOUT_MS). */
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
 * first): the call's time (its deadline until sent, its own limit once sent), the circuit breaker, the fleet's budget, the slots and their queue, the back-off
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
      backoff({ window: options.backoff, budget: options.budget }),
      concurrency({ limiter: options.limiter, latency: options.latency, callerMs, now }),
      budget({ budget: options.budget, latency: options.latency, now }),
      breaker({ breaker: options.breaker, callerMs, now }),
      deadline({ callerMs, now })
    )
  }

  get breakerState (): BreakerState {
    return this.#options.breaker.state
  }

  /** The fleet's effective budget now (halved after a 429, recovering); undefined when unlimited. */
  get budgetRate (): BudgetRate | undefined {
    return this.#options.budget.rate()
  }

  /**
   * `signal` drops the call, if it has not been sent yet, when nobody waits for its answer any more; once sent it
   * runs to its answer or its own limit. `priority` is why it is made; `deadlineAt` (the app's clock) when the caller
   * that started the load gives up (set at the cache boundary; absent: a call made now, `callerMs` from now).
   */
  async profile (username: string, signal?: AbortSignal, priority: Priority = 'caller', deadlineAt?: number): Promise<UpstreamAnswer<ProfileResponse>> {
    return await this.#get('profile', `/profile/${encodeURIComponent(username)}`, readUpstreamProfile, this.#call(priority, signal, deadlineAt))
  }

  async timeline (username: string, signal?: AbortSignal, priority: Priority = 'caller', deadlineAt?: number): Promise<UpstreamAnswer<TimelineResponse>> {
    return await this.#get('timeline', `/profile/${encodeURIComponent(username)}/timeline`, readUpstreamTimeline, this.#call(priority, signal, deadlineAt))
  }

  /**
   * A refusal known before any call, reported as a call refused unsent would be: the circuit open, the back-off window
   * (as this instance knows it), no token while the identity provider fails, or the budget spent. Undefined: it may try.
   * Cheap and synchronous, so that the cache asks it before it takes a lock or reads any more for a miss.
   */
  refusesNow (resource: Resource, priority: Priority, deadlineAt: number): Error | undefined {
    const call = this.#call(priority, undefined, deadlineAt)
    const refused = this.#knownRefusal(call)
    return refused === undefined ? undefined : this.#failed(resource, call, refused)
  }

  /** Whether `refusesNow` would refuse, counting and settling nothing: a cold read then claims no load it would only release. */
  wouldRefuse (priority: Priority, deadlineAt: number): boolean {
    const { breaker, backoff, tokens, budget, latency } = this.#options
    if (breaker.retryInMs > 0 || backoff.remainingMs > 0 || tokens.refusing) return true
    return budget.refuses(priority, sendBy(this.#call(priority, undefined, deadlineAt), latency.expectedMs))
  }

  /** Asked again when the call starts, so that a refusal known then spends no budget call and waits for no slot. */
  #knownRefusal (call: EdgeCall): Error | undefined {
    const { breaker, backoff, tokens, budget, latency } = this.#options
    const breakerMs = breaker.retryInMs
    if (breakerMs > 0) return withoutStack(() => new EdgeFailure({ kind: 'breaker', retryInMs: breakerMs }))
    const backoffMs = backoff.remainingMs
    if (backoffMs > 0) return withoutStack(() => new EdgeFailure({ kind: 'backoff', retryInMs: backoffMs }))
    return tokens.refusesNow() ?? budget.refusesNow(call.priority, sendBy(call, latency.expectedMs))
  }

  #call (priority: Priority, unwanted: AbortSignal | undefined, deadlineAt = this.#options.now() + this.#options.callerMs): EdgeCall {
    return { priority, deadlineAt, ...(unwanted !== undefined && { unwanted }) }
  }

  async #get<T> (resource: Resource, path: string, read: (body: unknown) => T | undefined, call: EdgeCall): Promise<UpstreamAnswer<T>> {
    // The call through the whole edge (queue, token, retries); undici's instrumentation adds the request on the wire.
    return await inSpan('upstream.call', { 'pbff.resource': resource, 'pbff.priority': call.priority }, async (span) => {
      try {
        const answer = await this.#answer(path, read, call)
        this.#report(resource, call, answer.found ? 'ok' : 'not_found')
        span.setAttribute('pbff.upstream.outcome', answer.found ? 'ok' : 'not_found')
        return answer
      } catch (error) {
        const coded = this.#failed(resource, call, error)
        span.setAttribute('pbff.upstream.outcome', outcomeOf(error, unwantedBeforeSent(call)))
        throw coded
      }
    })
  }

  /** Not undici's `signal`, which would abort the request on the wire: the edge drops the call only before it is sent. */
  async #answer<T> (path: string, read: (body: unknown) => T | undefined, call: EdgeCall): Promise<UpstreamAnswer<T>> {
    const refused = this.#knownRefusal(call)
    if (refused !== undefined) throw refused
    const options: EdgeOptions & Dispatcher.RequestOptions = {
      method: 'GET',
      path: this.#options.basePath + path,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      call
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

  /**
   * The caller's error for a call that failed, reported once: a call dropped unsent because nobody wanted it is
   * `cancelled`, any other unsent one `short_circuited` (for want of a token: the token's failure).
   */
  #failed (resource: Resource, call: EdgeCall, error: unknown): Error {
    const signal = unwantedBeforeSent(call)
    const outcome = outcomeOf(error, signal)
    if (call.sentAt !== undefined || outcome === 'cancelled') this.#report(resource, call, outcome)
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

/** Whether nobody wanting the call counts: only before it was sent, since a sent call runs to its end whoever waits. */
function unwantedBeforeSent (call: EdgeCall): AbortSignal | undefined {
  return call.sentAt === undefined ? call.unwanted : undefined
}
