import type { Socket } from 'node:net'
import type { FastifyRequest } from 'fastify'
import { isCancellation, nobodyWaits } from '../cancellation.ts'

/** One signal per connection, made the first time one of its requests asks: a hit costs a map lookup. */
const signals = new WeakMap<Socket, AbortSignal>()

/**
 * Aborts when the caller's connection closes: the one way a caller goes away. A request that half-closes
 * (sends its request, then shuts its writing side) is still waiting for its answer.
 */
export function callerSignal (request: FastifyRequest): AbortSignal {
  const socket = request.raw.socket
  let signal = signals.get(socket)
  if (signal === undefined) {
    const controller = new AbortController()
    signal = controller.signal
    if (socket.destroyed) controller.abort(nobodyWaits('the caller went away'))
    else socket.once('close', () => controller.abort(nobodyWaits('the caller went away')))
    signals.set(socket, signal)
  }
  return signal
}

/** Whether `error` ended a request because its caller had gone: nothing can be sent, and nothing of ours failed. */
export function callerWentAway (request: FastifyRequest, error: unknown): boolean {
  return isCancellation(error) && callerSignal(request).aborted
}
