import type { FastifyRequest } from 'fastify'

/**
 * Whether `error` is the caller going away: the reason Fastify's `request.signal` aborted with when the
 * connection closed before the answer (a waiter for a load rejects with it). Other errors never build
 * the signal.
 */
export function callerWentAway (request: FastifyRequest, error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError' && request.signal.aborted && request.signal.reason === error
}
