import { isCancellation } from '../cancellation.ts'
import {
  UPSTREAM_AUTH_FAILED, UPSTREAM_BUDGET_EXHAUSTED, UPSTREAM_ERROR, UPSTREAM_INVALID_RESPONSE, UPSTREAM_OVERLOADED, UPSTREAM_RATE_LIMITED, UPSTREAM_TIMEOUT, refusal, withRetryAfter
} from '../errors.ts'
import type { UpstreamOutcome } from '../telemetry/telemetry.ts'
import { isBudgetDropped } from './budget/priorities.ts'
import { isConnectionError, isTimeout, isTooLarge } from './transport-errors.ts'

/** What an interceptor or the client found, before it is the contract's error (see `contractError`). */
export type EdgeFact =
  /** Refused unsent: the upstream asked for a pause, which lasts this long. */
  | { kind: 'backoff', retryInMs: number }
  /** Refused unsent: the circuit is open (or its one probe is out). */
  | { kind: 'breaker', retryInMs: number }
  /** Refused unsent: every slot is busy and the queue is full; a slot frees within about `retryInMs`. */
  | { kind: 'overloaded', retryInMs: number }
  /** Refused unsent: the caller's remaining time is less than the upstream has been taking. */
  | { kind: 'too_late' }
  /** The upstream answered 429 (or 503 with Retry-After). */
  | { kind: 'rate_limited', seconds: number }
  /** The upstream refused a freshly renewed token too. */
  | { kind: 'auth_refused', status: number }
  /** The upstream answered a status we have no use for. */
  | { kind: 'status', status: number }
  /** The upstream's body is not the documented shape. */
  | { kind: 'invalid' }

export class EdgeFailure extends Error {
  readonly fact: EdgeFact

  constructor (fact: EdgeFact) {
    super(`upstream call ended: ${fact.kind}`)
    this.fact = fact
  }
}

const FACT_OUTCOMES: Record<EdgeFact['kind'], UpstreamOutcome> = {
  backoff: 'short_circuited',
  breaker: 'short_circuited',
  overloaded: 'short_circuited',
  too_late: 'short_circuited',
  rate_limited: 'rate_limited',
  auth_refused: 'auth_refused',
  status: 'error',
  invalid: 'invalid'
}

/** How a call that failed with `error` ended, as telemetry names it; `signal` says whether its callers left. */
export function outcomeOf (error: unknown, signal: AbortSignal | undefined): UpstreamOutcome {
  // The error itself when the callers' signal reached the request first (undici listens to it before the edge does).
  if (isCancellation(error) || (signal?.aborted === true && isCancellation(signal.reason))) return 'cancelled'
  if (error instanceof EdgeFailure) return FACT_OUTCOMES[error.fact.kind]
  if (isBudgetRefusal(error)) return 'short_circuited'
  if (isTimeout(error)) return 'timeout'
  if (isTooLarge(error) || error instanceof SyntaxError) return 'invalid'
  if (error instanceof UPSTREAM_AUTH_FAILED) return 'auth_refused'
  return 'error'
}

/** A call out for at least half of its caller's time had a fair share of it: a timeout then is the upstream's. */
export function hadFairShare (elapsedMs: number, callerMs: number): boolean {
  return elapsedMs >= callerMs / 2
}

/** Whether a call's failure is the upstream's: a timeout only after a fair share of the time, not when the queue ate it. */
export function upstreamFailed (outcome: UpstreamOutcome, elapsedMs: number, callerMs: number): boolean {
  return outcome === 'error' || (outcome === 'timeout' && hadFairShare(elapsedMs, callerMs))
}

/** The one place a failure becomes what the caller sees: the contract's coded error, or the reason its callers left. */
export function contractError (error: unknown, signal: AbortSignal | undefined, callerMs: number): Error {
  if (signal?.aborted === true && isCancellation(signal.reason)) return signal.reason as Error
  if (error instanceof EdgeFailure) return factError(error.fact, callerMs)
  if (error instanceof UPSTREAM_AUTH_FAILED || isBudgetRefusal(error)) return error
  if (isTimeout(error)) return new UPSTREAM_TIMEOUT(callerMs, { cause: error })
  if (isConnectionError(error)) return new UPSTREAM_ERROR('it could not be reached', { cause: error })
  if (isTooLarge(error)) return new UPSTREAM_INVALID_RESPONSE({ cause: error })
  // No cause: the parser's message quotes the body, which may echo what was sent (a token) into the log.
  if (error instanceof SyntaxError) return new UPSTREAM_INVALID_RESPONSE()
  return new UPSTREAM_ERROR('the request failed', { cause: error })
}

function factError (fact: EdgeFact, callerMs: number): Error {
  switch (fact.kind) {
    // Refused unsent, at once: counted as refusals, built without a stack (see `refusal`).
    case 'backoff':
      return refusal('backoff', () => rateLimited(fact.retryInMs / 1000))
    case 'rate_limited':
      return rateLimited(fact.seconds)
    case 'breaker':
      return refusal('breaker', () => new UPSTREAM_ERROR(`paused after repeated failures, next try within ${seconds(fact.retryInMs)} s`))
    case 'overloaded':
      return refusal('overloaded', () => withRetryAfter(new UPSTREAM_OVERLOADED(), seconds(fact.retryInMs)))
    case 'too_late':
      return new UPSTREAM_TIMEOUT(callerMs)
    case 'auth_refused':
      return new UPSTREAM_AUTH_FAILED(`the profile service refused a fresh token (${fact.status})`)
    case 'status':
      return new UPSTREAM_ERROR(`status ${fact.status}`)
    case 'invalid':
      return new UPSTREAM_INVALID_RESPONSE()
  }
}

function rateLimited (after: number): Error {
  const whole = Math.max(1, Math.ceil(after))
  return withRetryAfter(new UPSTREAM_RATE_LIMITED(whole), whole)
}

/** Whole seconds, at least one: what a caller is told to wait. */
function seconds (ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000))
}

/** Refused unsent by the fleet's budget: a caller at its deadline (already the contract's error), or background work dropped. */
function isBudgetRefusal (error: unknown): error is Error {
  return error instanceof UPSTREAM_BUDGET_EXHAUSTED || isBudgetDropped(error)
}
