import { errors } from 'undici'
import { isDeadline } from '../cancellation.ts'

/** undici's ways of saying "too slow", and a deadline's. */
export function isTimeout (error: unknown): boolean {
  return error instanceof errors.HeadersTimeoutError ||
    error instanceof errors.BodyTimeoutError ||
    error instanceof errors.ConnectTimeoutError ||
    isDeadline(error)
}

/** Codes of a connection that failed or dropped before an answer: safe to retry once for a GET. */
export const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'])

export function isConnectionError (error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && CONNECTION_CODES.has(code)
}

export function isTooLarge (error: unknown): boolean {
  return error instanceof errors.ResponseExceededMaxSizeError
}
