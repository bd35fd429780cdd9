import createError from '@fastify/error'

/**
 * Every error a caller can see, under the contract's codes. Messages never carry a token, a secret,
 * a stack or an upstream body: whatever caused the error travels as `cause`, which is logged, never sent.
 */

// Bad input
export const INVALID_USERNAME = createError('INVALID_USERNAME',
  'username must be 1 to 128 characters, not "." or "..", without control characters', 400)
export const INVALID_FIELD = createError<[string, string]>('INVALID_FIELD', '%s must be one of: %s', 400)
export const NOT_FOUND = createError<[string, string]>('NOT_FOUND', 'Route %s %s not found', 404)
export const INVALID_BATCH = createError<[number]>('INVALID_BATCH',
  'username must be given 1 to 50 times (distinct values), here %d', 400)
export const METHOD_NOT_ALLOWED = createError<[string, string]>('METHOD_NOT_ALLOWED', 'Method %s is not allowed here; allowed: %s', 405)

// Requests refused before any route: by Node's HTTP parser, or for their framing
export const MALFORMED_REQUEST = createError<[string]>('MALFORMED_REQUEST', 'The request is not valid HTTP/1.1: %s', 400)
export const REQUEST_TIMEOUT = createError('REQUEST_TIMEOUT', 'The request did not arrive in time', 408)
export const PAYLOAD_TOO_LARGE = createError('PAYLOAD_TOO_LARGE', 'Request body is too large', 413)
export const URI_TOO_LONG = createError<[number]>('URI_TOO_LONG', 'The request line is longer than %d octets', 414)
export const EXPECTATION_FAILED = createError('EXPECTATION_FAILED', 'The only expectation supported is "Expect: 100-continue"', 417)
export const HEADERS_TOO_LARGE = createError<[number]>('HEADERS_TOO_LARGE', 'The request\'s headers are larger than %d KiB', 431)

/** The failure behind an error, kept for the log (the last constructor argument, as @fastify/error reads it). */
type Cause = { cause: unknown }

// What the upstream said
export const PROFILE_NOT_FOUND = createError<[string]>('PROFILE_NOT_FOUND', 'No profile for username %s', 404)
export const UPSTREAM_ERROR = createError<[string, Cause?]>('UPSTREAM_ERROR', 'The profile service failed: %s', 502)
export const UPSTREAM_INVALID_RESPONSE = createError<[Cause?]>('UPSTREAM_INVALID_RESPONSE',
  'The profile service answered with an unexpected body', 502)
export const UPSTREAM_TIMEOUT = createError<[number, Cause?]>('UPSTREAM_TIMEOUT', 'The profile service did not answer within %d ms', 504)
export const UPSTREAM_AUTH_FAILED = createError<[string, Cause?]>('UPSTREAM_AUTH_FAILED',
  'Could not authenticate with the profile service: %s', 502)

// Protection
export const RATE_LIMITED = createError<[number]>('RATE_LIMITED', 'Too many requests: retry in %d s', 429)
export const UPSTREAM_RATE_LIMITED = createError<[number]>('UPSTREAM_RATE_LIMITED',
  'The profile service asks us to slow down: retry in %d s', 503)
export const UPSTREAM_OVERLOADED = createError('UPSTREAM_OVERLOADED',
  'Too many profile lookups are waiting: retry shortly', 503)
export const SERVICE_OVERLOADED = createError<[number]>('SERVICE_OVERLOADED',
  'The service is under too much load: retry in %d s', 503)
export const SHUTTING_DOWN = createError('SHUTTING_DOWN', 'The service is shutting down', 503)
export const UNAUTHORIZED = createError('UNAUTHORIZED', 'A valid admin bearer token is required', 401)
export const UPSTREAM_BUDGET_EXHAUSTED = createError<[number]>('UPSTREAM_BUDGET_EXHAUSTED',
  'The profile service\'s call budget is spent: retry in %d s', 503)

// The shared cache
export const CACHE_UNAVAILABLE = createError<[string, Cause?]>('CACHE_UNAVAILABLE', 'The shared cache is unreachable: %s', 503)

// Anything unexpected: the details go to the log only.
export const INTERNAL_ERROR = createError('INTERNAL_ERROR', 'Internal server error', 500)

/** Failures of what we depend on, or load we turn away: logged at warn, since nothing of ours is broken. */
export const EXPECTED_FAILURES: ReadonlySet<string> = new Set([
  new UPSTREAM_ERROR(''), new UPSTREAM_INVALID_RESPONSE(), new UPSTREAM_TIMEOUT(0), new UPSTREAM_AUTH_FAILED(''),
  new UPSTREAM_RATE_LIMITED(0), new UPSTREAM_OVERLOADED(), new SERVICE_OVERLOADED(0), new RATE_LIMITED(0),
  new UPSTREAM_BUDGET_EXHAUSTED(0)
].map((error) => error.code))

/** Why a caller was refused at once, without waiting for the upstream: counted (pbff_refusals_total) and summed up in the log. */
export const REFUSAL_REASONS = ['no-token', 'backoff', 'budget', 'overloaded', 'breaker', 'rate-limited'] as const
export type RefusalReason = typeof REFUSAL_REASONS[number]

interface Refusal {
  refusalReason: RefusalReason
}

/**
 * An error built without a stack: a refusal decided at once for a known reason (no token, a back-off, a budget spent)
 * is answered many times a second when it happens, and a stack would be its largest cost and tell nothing.
 */
export function withoutStack<E extends Error> (make: () => E): E {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return make()
  } finally {
    Error.stackTraceLimit = limit
  }
}

/** A caller's refusal decided at once, tagged with its reason, without a stack. */
export function refusal<E extends Error> (reason: RefusalReason, make: () => E): E & Refusal {
  return Object.assign(withoutStack(make), { refusalReason: reason })
}

export function refusalOf (error: unknown): RefusalReason | undefined {
  return (error as Partial<Refusal> | null)?.refusalReason
}

/** An error that tells the caller when to come back (sent as `Retry-After`). */
export interface RetryAfter {
  retryAfterSeconds: number
}

export function withRetryAfter<E extends Error> (error: E, seconds: number): E & RetryAfter {
  return Object.assign(error, { retryAfterSeconds: Math.max(1, Math.ceil(seconds)) })
}

/** What a 503 that names no moment of its own asks (CACHE_UNAVAILABLE, SHUTTING_DOWN): every 503 carries Retry-After. */
const DEFAULT_RETRY_AFTER_SECONDS = 5

export function retryAfterOf (error: unknown): number | undefined {
  const { retryAfterSeconds: seconds, statusCode } = (error ?? {}) as Partial<RetryAfter> & { statusCode?: unknown }
  if (typeof seconds === 'number') return seconds
  return statusCode === 503 ? DEFAULT_RETRY_AFTER_SECONDS : undefined
}

/** An error whose answer may be cached this long (a negative entry's 404); any other error answers `no-store`. */
export interface CacheableFor {
  maxAgeSeconds: number
}

export function withMaxAge<E extends Error> (error: E, seconds: number): E & CacheableFor {
  return Object.assign(error, { maxAgeSeconds: Math.max(0, Math.floor(seconds)) })
}

export function maxAgeOf (error: unknown): number | undefined {
  const seconds = (error as Partial<CacheableFor> | null)?.maxAgeSeconds
  return typeof seconds === 'number' ? seconds : undefined
}
