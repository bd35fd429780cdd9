import type { Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { pendingAnswers, type PendingAnswers } from './pending-answers.ts'

/** How often a half-closed connection with an answer pending is probed: a caller that left is seen within this and a round trip. */
const PROBE_EVERY_MS = 100

/**
 * Answers a request whose client shut its writing side after sending it (a common client and proxy
 * behaviour): by default node:http aborts such a request and ends the connection, so a cache miss would
 * get an empty reply and its load be cancelled as if its caller had gone. A caller is gone only when its
 * connection closes; but TCP tells a client that closed outright from one that only half-closed only
 * once something is written to it. So while an answer is pending on a half-closed connection, it is sent
 * `102 Processing` (an interim answer every HTTP/1.1 client skips) every PROBE_EVERY_MS: a client that
 * closed answers with a reset, the connection closes, and the caller's signal aborts.
 * `httpAllowHalfOpen` is node:http's own switch (kept for userland servers, undocumented); Node is pinned
 * in .nvmrc, and test/ops/half-close.test.ts fails should an upgrade drop it.
 */
export function answerHalfClosedRequests (server: Server): void {
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true
  const pending = pendingAnswers(server)
  server.on('connection', (socket: Socket) => {
    socket.once('end', () => { probeWhilePending(socket, pending) })
  })
}

function probeWhilePending (socket: Socket, pending: PendingAnswers): void {
  // HTTP/1.0 clients may not be sent a 1xx answer.
  const waiting = (): ServerResponse[] => pending.on(socket).filter((response) => !response.headersSent && response.req.httpVersion === '1.1')
  const probe = (): void => {
    const answers = waiting()
    if (answers.length === 0 || socket.destroyed) {
      clearInterval(timer)
      return
    }
    answers[0]?.writeProcessing()
  }
  const timer = setInterval(probe, PROBE_EVERY_MS).unref()
  socket.once('close', () => { clearInterval(timer) })
  probe()
}
