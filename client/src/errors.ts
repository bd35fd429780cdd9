import { numberHeader, rateLimitOf, type RateLimit } from './header-values.ts'
import type { components, operations } from './openapi.ts'

/** The operations this client calls: the data routes (the operational and admin ones are for operators). */
export type DataOperation = 'getProfile' | 'getTimeline' | 'getField' | 'getProfiles'
type Operation = DataOperation & keyof operations
type Responses<O extends Operation> = operations[O]['responses']
type ErrorBodyOf<O extends Operation> = {
  [S in keyof Responses<O>]: S extends 200 | 304 ? never
    : Responses<O>[S] extends { content: { 'application/json': infer Body } } ? Body : never
}[keyof Responses<O>]

/** A path no route has: no data route documents it, but every call meets it when `baseUrl` is wrong. */
type RouteNotFoundCode = components['responses']['NotFound']['content']['application/json']['code']

/** Every error code the service documents for the routes this client calls (a batch member's included), and NOT_FOUND. */
export type ServiceErrorCode =
  | ({ [O in Operation]: ErrorBodyOf<O> }[Operation] extends infer Body ? Body extends { code: infer Code } ? Code : never : never)
  | RouteNotFoundCode

/** Failures found on this side: no answer at all, or an answer that is not the service's. */
export type ClientErrorCode = 'NETWORK_ERROR' | 'UNEXPECTED_RESPONSE'

export type ErrorCode = ServiceErrorCode | ClientErrorCode

/** The service's `{statusCode, code, error, message}`, thrown by every call that does not answer 200 or 304. */
export class ProfileBffError extends Error {
  readonly code: ErrorCode
  /** 0 when no answer came. */
  readonly statusCode: number
  /** The answer's `X-Request-Id`: quote it when reporting a problem. */
  readonly requestId: string | undefined
  /** From `Retry-After`, on 429 and 503. */
  readonly retryAfterSeconds: number | undefined
  /** From `X-RateLimit-*`: on a RATE_LIMITED, `reset` says when the budget is renewed. */
  readonly rateLimit: RateLimit | undefined

  constructor (code: ErrorCode, statusCode: number, message: string, headers?: Headers, options?: { cause: unknown }) {
    super(message, options)
    this.name = 'ProfileBffError'
    this.code = code
    this.statusCode = statusCode
    this.requestId = headers?.get('x-request-id') ?? undefined
    this.retryAfterSeconds = numberHeader(headers, 'retry-after')
    this.rateLimit = rateLimitOf(headers)
  }
}
