import { STATUS_CODES } from 'node:http'
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
 * messages; Fastify's own client errors take the contract's code, or keep their status under a code
 * named after it; anything else is a 500 whose details only reach the log.
 */
export function errorResponse (error: Partial<FastifyError>): ErrorResponse {
  if (error.code !== undefined && CONTRACT_CODES.has(error.code) && error.statusCode !== undefined) {
    return errorBody(error as FastifyError)
  }
  const named = FASTIFY_ERRORS.get(error.code ?? '')
  if (named !== undefined) return errorBody(named())
  const status = error.statusCode ?? 500
  // Fastify's own messages may quote the URL or a header: only a short prefix of them goes back.
  if (status >= 400 && status < 500) return errorBody({ statusCode: status, code: codeOfStatus(status), message: shortPrefix(error.message ?? '', 80) })
  return errorBody(new errors.INTERNAL_ERROR())
}

/** `Payload Too Large` -> `PAYLOAD_TOO_LARGE`. */
function codeOfStatus (status: number): string {
  return (STATUS_CODES[status] ?? 'Error').toUpperCase().replace(/\W+/g, '_')
}
