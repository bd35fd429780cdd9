import { interceptors, type Dispatcher } from 'undici'
import {
  UPSTREAM_AUTH_FAILED, UPSTREAM_ERROR, UPSTREAM_INVALID_RESPONSE, UPSTREAM_RATE_LIMITED, UPSTREAM_TIMEOUT, withRetryAfter
} from '../errors.ts'
import { readUpstreamProfile, readUpstreamTimeline, type ProfileResponse, type TimelineResponse } from '../schemas/profile.ts'
import type { Resource } from '../resources.ts'
import type { BreakerState, Telemetry, UpstreamOutcome } from '../telemetry/telemetry.ts'
import type { BackoffWindow } from './backoff-window.ts'
import type { CircuitBreaker, Permit } from './circuit-breaker.ts'
import type { ConcurrencyLimiter } from './concurrency-limiter.ts'
import type { UpstreamLog } from './log.ts'
import type { AccessToken } from './access-token.ts'
import type { TokenManager } from './token-manager.ts'
import { CONNECTION_CODES, isConnectionError, isTimeout, isTooLarge } from './transport-errors.ts'
import { untilAborted } from '../until-aborted.ts'

/** What a lookup found: the validated body, or that the upstream has no such member. */
export type UpstreamAnswer<T> = { found: true, body: T } | { found: false }

export interface UpstreamClientOptions {
  /** Dispatcher bound to the upstream's origin. */
  dispatcher: Dispatcher
  /** Path of UPSTREAM_BASE_URL (kept, routes appended), without a trailing slash. */
  basePath: string
  tokens: Pick<TokenManager, 'getToken' | 'invalidate'>
  authScheme: string
  /** Covers a caller's whole wait: the queue, the token, the request and its body. */
  timeoutMs: number
  limiter: Pick<ConcurrencyLimiter, 'run'>
  breaker: CircuitBreaker
  backoff: BackoffWindow
  telemetry: Pick<Telemetry, 'upstreamCall'>
  log: UpstreamLog
  now?: () => number
}

/** Upper bound for a Retry-After we honour, so a bogus header cannot silence us for days. */
export const MAX_RETRY_AFTER_SECONDS = 300
const DEFAULT_RETRY_AFTER_SECONDS = 5
/** The one retry of a GET whose connection failed before any answer, after this pause; a 5xx is an answer, never retried. */
const retryOnceAfterConnectionError = interceptors.retry({
  maxRetries: 1,
  minTimeout: 100,
  methods: ['GET'],
  statusCodes: [],
  errorCodes: [...CONNECTION_CODES]
})

/** How one call ended: an answer, or the coded error the caller gets. */
type Call<T> = { outcome: UpstreamOutcome, answer: UpstreamAnswer<T> } | { outcome: UpstreamOutcome, error: Error }
type Sent = { response: Dispatcher.ResponseData } | { outcome: UpstreamOutcome, error: Error }

/**
 * One typed method per upstream resource; every failure becomes one of the contract's coded errors.
 * The token is taken inside the limiter's slot, so a queued call never carries a token replaced while it waited.
 */
export class UpstreamClient {
  readonly #options: UpstreamClientOptions
  readonly #dispatcher: Dispatcher
  readonly #now: () => number

  constructor (options: UpstreamClientOptions) {
    this.#options = options
    this.#dispatcher = options.dispatcher.compose(retryOnceAfterConnectionError)
    this.#now = options.now ?? Date.now
  }

  get breakerState (): BreakerState {
    return this.#options.breaker.state
  }

  get backoffRemainingMs (): number {
    return this.#options.backoff.remainingMs
  }

  /** `cancel` aborts the call when nobody waits for its answer any more. */
  async profile (username: string, cancel?: AbortSignal): Promise<UpstreamAnswer<ProfileResponse>> {
    return await this.#get('profile', `/profile/${encodeURIComponent(username)}`, readUpstreamProfile, cancel)
  }

  async timeline (username: string, cancel?: AbortSignal): Promise<UpstreamAnswer<TimelineResponse>> {
    return await this.#get('timeline', `/profile/${encodeURIComponent(username)}/timeline`, readUpstreamTimeline, cancel)
  }

  async #get<T> (resource: Resource, path: string, read: (body: unknown) => T | undefined, cancel: AbortSignal | undefined): Promise<UpstreamAnswer<T>> {
    const { backoff, breaker, limiter, timeoutMs } = this.#options
    // Known windows refuse before queueing; the shared window is checked once a slot is ours.
    this.#refuseIf(resource, backoff.remainingMs, breaker.state === 'open')
    // The caller's whole wait (queue, token, request and body) ends UPSTREAM_TIMEOUT_MS from now.
    const deadline = this.#now() + timeoutMs
    const timeout = AbortSignal.timeout(timeoutMs)
    const signal = cancel === undefined ? timeout : AbortSignal.any([timeout, cancel])
    let sent = false
    try {
      return await limiter.run(async () => {
        if (this.#now() >= deadline) throw new DOMException('its deadline passed in the queue', 'TimeoutError')
        this.#refuseIf(resource, await backoff.check(), false)
        const token = await untilAborted(this.#options.tokens.getToken(), signal)
        const permit = breaker.tryAcquire()
        if (permit === undefined) throw this.#refusal(resource, 0)
        sent = true
        return await this.#probed(resource, path, token, read, signal, permit)
      }, signal)
    } catch (error) {
      // A call sent is reported by #probed; one dropped before (its caller's time ran out, or its callers
      // left, in the queue or waiting for a token) is counted here, as never sent.
      if (sent || !(isTimeout(error) || error === signal.reason)) throw error
      this.#options.telemetry.upstreamCall(resource, 'short_circuited', 0)
      throw isTimeout(error) ? new UPSTREAM_TIMEOUT(timeoutMs, { cause: error }) : error
    }
  }

  /** One call through the breaker, which learns whether the upstream failed. */
  async #probed<T> (
    resource: Resource, path: string, token: AccessToken, read: (body: unknown) => T | undefined, signal: AbortSignal, permit: Permit
  ): Promise<UpstreamAnswer<T>> {
    const started = this.#now()
    let call: Call<T> | undefined
    try {
      call = await this.#call(path, token, read, signal)
    } finally {
      // A cancelled call says nothing about the upstream, neither failure nor success.
      if (call?.outcome === 'cancelled') this.#options.breaker.abstain(permit)
      else this.#options.breaker.record(permit, call !== undefined && this.#upstreamFailed(call.outcome, this.#now() - started))
    }
    this.#options.telemetry.upstreamCall(resource, call.outcome, (this.#now() - started) / 1000)
    if ('answer' in call) return call.answer
    if (call.outcome !== 'cancelled') this.#options.log.warn({ err: call.error, resource, outcome: call.outcome }, 'upstream call failed')
    throw call.error
  }

  /** A timeout counts against the upstream only when the request had a fair share of the time: not when the queue ate it. */
  #upstreamFailed (outcome: UpstreamOutcome, elapsedMs: number): boolean {
    return outcome === 'error' || (outcome === 'timeout' && elapsedMs >= this.#options.timeoutMs / 2)
  }

  #refuseIf (resource: Resource, backoffMs: number, breakerOpen: boolean): void {
    if (backoffMs > 0 || breakerOpen) throw this.#refusal(resource, backoffMs)
  }

  /** A call refused before it was sent: inside a back-off window (`backoffMs` > 0), else by the breaker. */
  #refusal (resource: Resource, backoffMs: number): Error {
    this.#options.telemetry.upstreamCall(resource, 'short_circuited', 0)
    if (backoffMs > 0) {
      const seconds = Math.ceil(backoffMs / 1000)
      return withRetryAfter(new UPSTREAM_RATE_LIMITED(seconds), seconds)
    }
    const seconds = Math.max(1, Math.ceil(this.#options.breaker.retryInMs / 1000))
    return new UPSTREAM_ERROR(`paused after repeated failures, next try within ${seconds} s`)
  }

  async #call<T> (path: string, token: AccessToken, read: (body: unknown) => T | undefined, signal: AbortSignal): Promise<Call<T>> {
    let sent = await this.#send(path, token, signal)
    if ('response' in sent && isAuthRefusal(sent.response.statusCode)) {
      await sent.response.body.dump()
      this.#options.tokens.invalidate(token)
      let renewed: AccessToken
      try {
        renewed = await untilAborted(this.#options.tokens.getToken(), signal)
      } catch (error) {
        return isTimeout(error) || signal.aborted ? this.#failure(error, signal) : { outcome: 'auth_refused', error: error as Error }
      }
      sent = await this.#send(path, renewed, signal)
      if ('response' in sent && isAuthRefusal(sent.response.statusCode)) {
        await sent.response.body.dump()
        return { outcome: 'auth_refused', error: new UPSTREAM_AUTH_FAILED(`the profile service refused a fresh token (${sent.response.statusCode})`) }
      }
    }
    return 'response' in sent ? await this.#interpret(sent.response, read, signal) : sent
  }

  async #send (path: string, token: AccessToken, signal: AbortSignal): Promise<Sent> {
    const { basePath, authScheme } = this.#options
    try {
      const response = await this.#dispatcher.request({
        method: 'GET',
        path: basePath + path,
        headers: {
          authorization: authScheme === '' ? token.value : `${authScheme} ${token.value}`,
          'content-type': 'application/json',
          accept: 'application/json'
        },
        // Covers the body too: undici destroys the body stream when it fires.
        signal
      })
      return { response }
    } catch (error) {
      return this.#failure(error, signal)
    }
  }

  async #interpret<T> ({ statusCode, headers, body }: Dispatcher.ResponseData, read: (body: unknown) => T | undefined, signal: AbortSignal): Promise<Call<T>> {
    if (statusCode === 404) {
      await body.dump()
      return { outcome: 'not_found', answer: { found: false } }
    }
    if (statusCode === 429 || (statusCode === 503 && headers['retry-after'] !== undefined)) {
      await body.dump()
      const seconds = retryAfterSeconds(headers['retry-after'], this.#now())
      await this.#options.backoff.open(seconds * 1000)
      return { outcome: 'rate_limited', error: withRetryAfter(new UPSTREAM_RATE_LIMITED(seconds), seconds) }
    }
    if (statusCode !== 200) {
      await body.dump()
      return { outcome: 'error', error: new UPSTREAM_ERROR(`status ${statusCode}`) }
    }
    let parsed: unknown
    try {
      parsed = await body.json()
    } catch (error) {
      return this.#failure(error, signal)
    }
    const valid = read(parsed)
    if (valid === undefined) return { outcome: 'invalid', error: new UPSTREAM_INVALID_RESPONSE() }
    return { outcome: 'ok', answer: { found: true, body: valid } }
  }

  /** A transport or parse failure as the caller sees it; one caused by the call's cancellation is no failure of the upstream. */
  #failure (error: unknown, signal: AbortSignal): { outcome: UpstreamOutcome, error: Error } {
    if (isCancelled(signal)) return { outcome: 'cancelled', error: signal.reason as Error }
    if (isTimeout(error)) return { outcome: 'timeout', error: new UPSTREAM_TIMEOUT(this.#options.timeoutMs, { cause: error }) }
    if (isConnectionError(error)) return { outcome: 'error', error: new UPSTREAM_ERROR('it could not be reached', { cause: error }) }
    if (isTooLarge(error) || error instanceof SyntaxError) return { outcome: 'invalid', error: new UPSTREAM_INVALID_RESPONSE({ cause: error }) }
    return { outcome: 'error', error: new UPSTREAM_ERROR('the request failed', { cause: error }) }
  }
}

/** Aborted, and not by its deadline: nobody waits for the call any more. */
function isCancelled (signal: AbortSignal): boolean {
  return signal.aborted && !isTimeout(signal.reason)
}

function isAuthRefusal (status: number): boolean {
  return status === 401 || status === 403
}

/** Retry-After in seconds or as an HTTP date, capped; a missing or unreadable one means a short pause. */
function retryAfterSeconds (header: string | string[] | undefined, now = Date.now()): number {
  const value = Array.isArray(header) ? header[0] : header
  if (value === undefined) return DEFAULT_RETRY_AFTER_SECONDS
  const seconds = /^\d+$/.test(value.trim()) ? Number(value) : (Date.parse(value) - now) / 1000
  if (!Number.isFinite(seconds)) return DEFAULT_RETRY_AFTER_SECONDS
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(seconds)))
}
