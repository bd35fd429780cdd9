import { STATUS_CODES } from 'node:http'
import { Type, type TObject } from '@sinclair/typebox'
import * as errors from '../errors.ts'
import { errorBody, StringEnum, type CodedError, type ErrorResponse } from './common.ts'
import { ERROR_HEADERS } from './headers.ts'
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
 * The response schemas of a route's errors, for the OpenAPI document: one per status, its `code` an
 * enum of every code the route can answer with it, with each code's body as an example (built by the
 * same `errorBody` that builds the real ones). An enum does not narrow what the serializer writes.
 */
function errorResponses (...errors: CodedError[]): Record<number, TObject> {
  const byStatus = new Map<number, ErrorResponse[]>()
  for (const error of errors) {
    const body = errorBody(error)
    byStatus.set(body.statusCode, [...byStatus.get(body.statusCode) ?? [], body])
  }
  return Object.fromEntries([...byStatus].map(([status, bodies]) => [status, ErrorBody(bodies.map((body) => body.code), {
    description: `${STATUS_CODES[status] ?? 'Error'}: ${bodies.map((body) => `\`${body.code}\``).join(', ')}`,
    examples: bodies,
    headers: ERROR_HEADERS
  })]))
}

/** What a username's lookup can fail with, in a batch as on its own (examples with plausible arguments). */
export const memberErrors = [
  new errors.PROFILE_NOT_FOUND('ghost-1'),
  new errors.UPSTREAM_ERROR('status 500'),
  new errors.UPSTREAM_INVALID_RESPONSE(),
  new errors.UPSTREAM_AUTH_FAILED('the identity provider answered 401'),
  new errors.UPSTREAM_RATE_LIMITED(30),
  new errors.UPSTREAM_OVERLOADED(),
  new errors.UPSTREAM_TIMEOUT(5000),
  new errors.INTERNAL_ERROR()
]

/** What any lookup request can fail with, whichever data route asks. */
const lookupErrors = [...memberErrors, new errors.RATE_LIMITED(42), new errors.SERVICE_OVERLOADED(5)]

/** The errors of `/profile/:username` and `/profile/:username/timeline`. */
export const lookupErrorResponses = errorResponses(new errors.INVALID_USERNAME(), ...lookupErrors)

/** The errors of `/user/:username?query=`: a bad field besides. */
export const fieldErrorResponses = errorResponses(
  new errors.INVALID_USERNAME(), new errors.INVALID_FIELD(QUERY_VALUES.join(', ')), ...lookupErrors)

/** The errors of the batch as a whole: a bad batch or field list, or protection (members' own go in the body). */
export const batchErrorResponses = errorResponses(
  new errors.INVALID_BATCH(51), new errors.INVALID_FIELD(QUERY_VALUES.join(', ')),
  new errors.RATE_LIMITED(42), new errors.SERVICE_OVERLOADED(5), new errors.INTERNAL_ERROR())
