import type { FastifyError } from 'fastify'
import { shortPrefix } from './caller-input.ts'
import { MAX_REQUEST_LINE_OCTETS } from './request-line.ts'
import * as errors from '../errors.ts'
import { errorBody, type ErrorResponse } from '../schemas/common.ts'

/** The contract's codes: every export of errors.ts whose name is its code. */
const CONTRACT_CODES = new Set(Object.keys(errors))

/** Fastify's own errors that the contract names. */
const FASTIFY_ERRORS: ReadonlyMap<string, () => FastifyError> = new Map([
  ['FST_ERR_CTP_BODY_TOO_LARGE', () => new errors.PAYLOAD_TOO_LARGE()],
  ['FST_ERR_MAX_PARAM_LENGTH', () => new errors.URI_TOO_LONG(MAX_REQUEST_LINE_OCTETS)]
])

/**
 * Any failure as the contract's body. Coded errors (a route's validation errors too) keep their safe
 * messages; Fastify's own client errors take the contract's code, or one of CLIENT_ERROR_CODES; anything
 * else is a 500 whose details only reach the log.
 */
export function errorResponse (error: Partial<FastifyError>): ErrorResponse {
  if (error.code !== undefined && CONTRACT_CODES.has(error.code) && error.statusCode !== undefined) {
    return errorBody(error as FastifyError)
  }
  const named = FASTIFY_ERRORS.get(error.code ?? '')
  if (named !== undefined) return errorBody(named())
  const status = error.statusCode ?? 500
  // Fastify's own messages may quote the URL or a header: only a short prefix of them goes back.
  if (status >= 400 && status < 500) return errorBody({ ...clientError(status), message: shortPrefix(error.message ?? '', 80) })
  return errorBody(new errors.INTERNAL_ERROR())
}

/**
 * The client errors Fastify and its plugins raise with no code of ours, each under a code the error table of
 * docs/reference.md lists: a malformed URL or body, a body of a type no parser takes (FST_ERR_*); a path under the
 * docs' static files that leaves their folder, a failed precondition or an unsatisfiable range (@fastify/static).
 */
const CLIENT_ERROR_CODES: ReadonlyMap<number, string> = new Map([
  [400, 'BAD_REQUEST'], [403, 'FORBIDDEN'], [404, 'NOT_FOUND'], [412, 'PRECONDITION_FAILED'],
  [415, 'UNSUPPORTED_MEDIA_TYPE'], [416, 'RANGE_NOT_SATISFIABLE']
])

/** Any other client error (none known) is answered as a bad request: a status and code of the table, never one outside it. */
function clientError (status: number): { statusCode: number, code: string } {
  const code = CLIENT_ERROR_CODES.get(status)
  return code === undefined ? { statusCode: 400, code: 'BAD_REQUEST' } : { statusCode: status, code }
}
