import { maxHeaderSize, STATUS_CODES } from 'node:http'
import { Type, type TObject } from '@sinclair/typebox'
import * as errors from '../errors.ts'
import { errorBody, StringEnum, type CodedError, type ErrorResponse } from './common.ts'
import { errorHeaders, type ErrorHeaderOptions } from './headers.ts'
import { QUERY_VALUES } from './profile.ts'

/** The error body, its `code` one of `codes` (an enum a client generator turns into a union type). */
export function ErrorBody (codes: readonly string[], options: Record<string, unknown> = {}): TObject {
  return Type.Object({
    statusCode: Type.Integer(),
    code: StringEnum(codes),
    error: Type.String(),
    message: Type.String()
  }, options)
}

/**
 * The response schemas of an operation's errors, for the OpenAPI document: one per status, its `code` an
 * enum of every code the operation can answer with it, with each code's body as an example (built by the
 * same `errorBody` that builds the real ones), and the headers it carries. An enum does not narrow what
 * the serializer writes.
 */
function errorResponses (headers: ErrorHeaderOptions, ...errors: CodedError[]): Record<number, TObject> {
  const byStatus = new Map<number, ErrorResponse[]>()
  for (const error of errors) {
    const body = errorBody(error)
    const known = byStatus.get(body.statusCode) ?? []
    // The sets below overlap (INTERNAL_ERROR is both a member's and any operation's): each code once.
    if (!known.some((one) => one.code === body.code)) byStatus.set(body.statusCode, [...known, body])
  }
  return Object.fromEntries([...byStatus].map(([status, bodies]) => [status, ErrorBody(bodies.map((body) => body.code), {
    description: `${STATUS_CODES[status] ?? 'Error'}: ${bodies.map((body) => `\`${body.code}\``).join(', ')}`,
    examples: bodies,
    headers: errorHeaders(status, headers)
  })]))
}

const counted: ErrorHeaderOptions = { rateLimited: true }
const lookup: ErrorHeaderOptions = { rateLimited: true, loads: true }
const uncounted: ErrorHeaderOptions = { rateLimited: false }

/** A path parameter that is not valid percent-encoding: Fastify's own error, under a code named after its status. */
const malformedUrl: CodedError = { statusCode: 400, code: 'BAD_REQUEST', message: '\'/profile/%ZZ\' is not a valid url component' }
const malformedQuery: CodedError = { ...malformedUrl, message: '\'/profiles?username=%ZZ\' is not a valid url component' }

/** A purge's body of a type other than JSON: Fastify's own error, under a code named after its status. */
const unsupportedBody: CodedError = { statusCode: 415, code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Unsupported Media Type' }

/**
 * Refused before any route runs, the same for every operation (Node's HTTP parser, or plugins/http-edges.ts):
 * the document lists them once, as components every operation refers to (see document.ts).
 */
export const refusedBeforeRouting = {
  RequestTimeout: new errors.REQUEST_TIMEOUT(),
  UriTooLong: new errors.URI_TOO_LONG(8000),
  ExpectationFailed: new errors.EXPECTATION_FAILED(),
  HeadersTooLarge: new errors.HEADERS_TOO_LARGE(maxHeaderSize / 1024)
}

/**
 * What any operation can answer besides: a malformed request (its 400 shares a status with the route's own
 * codes), a body too large (after the rate limit on a POST, from the parser on a GET), or a failure of ours.
 */
const edgeErrors = [
  new errors.MALFORMED_REQUEST('Invalid header value char'),
  new errors.PAYLOAD_TOO_LARGE(),
  new errors.INTERNAL_ERROR()
]

/** Load shedding: every operation but those still answered under pressure. */
const shed = new errors.SERVICE_OVERLOADED(5)

/** What a username's lookup can fail with, in a batch as on its own (examples with plausible arguments). */
export const memberErrors = [
  new errors.PROFILE_NOT_FOUND('ghost-1'),
  new errors.UPSTREAM_ERROR('status 500'),
  new errors.UPSTREAM_INVALID_RESPONSE(),
  new errors.UPSTREAM_AUTH_FAILED('the identity provider answered 401'),
  new errors.UPSTREAM_RATE_LIMITED(30),
  new errors.UPSTREAM_OVERLOADED(),
  new errors.UPSTREAM_BUDGET_EXHAUSTED(2),
  new errors.UPSTREAM_TIMEOUT(5000),
  new errors.INTERNAL_ERROR()
]

/** What any lookup request can fail with, whichever data route asks. */
const lookupErrors = [...memberErrors, new errors.RATE_LIMITED(42), shed]

const invalidField = new errors.INVALID_FIELD('query', QUERY_VALUES.join(', '))

/** The errors of `/profile/:username` and `/profile/:username/timeline`. */
export const lookupErrorResponses = errorResponses(lookup, new errors.INVALID_USERNAME(), malformedUrl, ...lookupErrors, ...edgeErrors)

/** The errors of `/user/:username?query=`: a bad field besides. */
export const fieldErrorResponses = errorResponses(lookup, new errors.INVALID_USERNAME(), invalidField, malformedUrl, ...lookupErrors, ...edgeErrors)

/** The errors of the batch as a whole: a bad batch or field list, or protection (members' own go in the body). */
export const batchErrorResponses = errorResponses(counted,
  new errors.INVALID_BATCH(51), new errors.INVALID_FIELD('fields', QUERY_VALUES.join(', ')), malformedQuery, new errors.RATE_LIMITED(42), shed, ...edgeErrors)

/** The errors of `/healthz` and `/metrics`: never counted, still answered while load is shed. */
export const unshedErrorResponses = errorResponses(uncounted, ...edgeErrors)

/** The errors of `/readyz`, whose 503 (shutting down) also carries the state: see routes/health.ts. */
export const readinessErrorResponses = errorResponses(uncounted, new errors.SHUTTING_DOWN(), shed, ...edgeErrors)

/** The errors of the admin purge: counted by the rate limit like the data routes. */
export const adminErrorResponses = errorResponses(counted, new errors.INVALID_USERNAME(), malformedUrl, new errors.UNAUTHORIZED(),
  unsupportedBody, new errors.RATE_LIMITED(42), new errors.CACHE_UNAVAILABLE('redis is down'), shed, ...edgeErrors)
