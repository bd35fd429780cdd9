import type { Server } from 'node:http'

/**
 * Answers a request whose client shut its writing side after sending it (a common client and proxy
 * behaviour): by default node:http aborts such a request and ends the connection, so a cache miss would
 * get an empty reply and the load be cancelled as if its caller had gone. With this, the caller is gone
 * only when its connection closes, and node:http still ends the connection once the answer is written.
 * `httpAllowHalfOpen` is node:http's own switch (kept for userland servers, undocumented); Node is pinned in
 * .nvmrc, and test/ops/half-close.test.ts fails should a Node upgrade drop it.
 */
export function answerHalfClosedRequests (server: Server): void {
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true
}
