import { STATUS_CODES } from 'node:http'
import { Type, type TObject } from '@sinclair/typebox'
import { errorResponse } from '../error-response.js'
import * as errors from '../errors.js'
import type { ErrorResponse } from './common.js'
import { QUERY_VALUES } from './profile.js'

/** An error a route can answer, as created by src/errors.ts (its code and status travel with it). */
interface CodedError {
  code: string
  statusCode?: number
  message: string
}

/**
 * The response schemas of a route's errors, for the OpenAPI document: one per status, describing every
 * code the route can answer with it, with each code's body as an example (built by the same
 * `errorResponse` that builds the real ones). Each schema is the plain error shape: documentation
 * must not narrow what the serializer accepts.
 */
export function errorResponses (...errors: CodedError[]): Record<number, TObject> {
  const byStatus = new Map<number, ErrorResponse[]>()
  for (const error of errors) {
    const body = errorResponse(error)
    byStatus.set(body.statusCode, [...byStatus.get(body.statusCode) ?? [], body])
  }
  return Object.fromEntries([...byStatus].map(([status, bodies]) => [status, Type.Object({
    statusCode: Type.Integer(),
    code: Type.String({ description: `one of: ${bodies.map((body) => body.code).join(', ')}` }),
    error: Type.String(),
    message: Type.String()
  }, {
    description: `${STATUS_CODES[status] ?? 'Error'}: ${bodies.map((body) => `\`${body.code}\``).join(', ')}`,
    examples: bodies
  })]))
}

/** What any lookup can fail with, whichever data route asks (examples with plausible arguments). */
const lookupErrors = [
  new errors.PROFILE_NOT_FOUND('ghost-1'),
  new errors.RATE_LIMITED(42),
  new errors.INTERNAL_ERROR(),
  new errors.UPSTREAM_ERROR('status 500'),
  new errors.UPSTREAM_INVALID_RESPONSE(),
  new errors.UPSTREAM_AUTH_FAILED('the identity provider answered 401'),
  new errors.UPSTREAM_RATE_LIMITED(30),
  new errors.UPSTREAM_OVERLOADED(),
  new errors.SERVICE_OVERLOADED(5),
  new errors.UPSTREAM_TIMEOUT(5000)
]

/** The errors of `/profile/:username` and `/profile/:username/timeline`. */
export const lookupErrorResponses = errorResponses(new errors.INVALID_USERNAME(), ...lookupErrors)

/** The errors of `/user/:username?query=`: a bad field besides. */
export const fieldErrorResponses = errorResponses(
  new errors.INVALID_USERNAME(), new errors.INVALID_FIELD(QUERY_VALUES.join(', ')), ...lookupErrors)
