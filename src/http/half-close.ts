import type { Server } from 'node:http'

/**
 * Answers a request whose client shut its writing side after sending it (a common client and proxy
 * behaviour): by default node:http aborts such a request and ends the connection, so a cache miss would
 * get an empty reply. A caller is gone only when its connection closes; the half-closed one gets its final
 * answer and nothing before it (a sent call runs to its end whoever waits, so nothing needs probing).
 * `httpAllowHalfOpen` is node:http's own switch (kept for userland servers, undocumented); Node is pinned
 * in .nvmrc, and test/ops/serving/half-close.ts fails should an upgrade drop it.
 */
export function answerHalfClosedRequests (server: Server): void {
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true
}
