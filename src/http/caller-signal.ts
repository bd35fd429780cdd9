import type { FastifyReply } from 'fastify'
import type { CallerSignal } from '../cache/swr-cache.ts'

/** Why a caller stopped waiting: its connection closed before its answer was sent, so nobody reads one. */
export class CallerGone extends Error {
  constructor () {
    super('the caller went away before its answer')
    this.name = 'CallerGone'
  }
}

/**
 * The signal of `reply`'s client going away, made on first call: only a caller that must wait for a
 * load asks for it, so a cache hit pays for no controller and no listener.
 */
export function callerSignal (reply: FastifyReply): CallerSignal {
  let signal: AbortSignal | undefined
  return () => (signal ??= whenGone(reply))
}

function whenGone ({ raw }: FastifyReply): AbortSignal {
  const controller = new AbortController()
  // 'close' also follows a complete answer: only a connection closed before that is a caller leaving.
  const leave = (): void => { if (!raw.writableFinished) controller.abort(new CallerGone()) }
  if (raw.destroyed) leave()
  else raw.once('close', leave)
  return controller.signal
}
