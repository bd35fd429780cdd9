import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'

/**
 * The answers each connection is still owed, oldest first, tracked from the server's own `request`
 * event: what a refusal written straight to the socket must wait for (answers go back in request
 * order).
 */
export class PendingAnswers {
  readonly #owed = new WeakMap<Duplex, Set<ServerResponse>>()
  /** Each connection's latest request that came with a body, and its answer: what the parser may refuse after that answer. */
  readonly #withBody = new WeakMap<Duplex, ServerResponse>()

  constructor (server: Server) {
    server.on('request', this.#track)
    // An unmet expectation is answered (417) without a 'request' event.
    server.on('checkExpectation', this.#track)
  }

  /** The answers owed on `socket`, oldest first (node:http writes them in that order). */
  on (socket: Duplex): ServerResponse[] {
    return [...this.#owed.get(socket) ?? []]
  }

  /**
   * Runs `write` once every answer owed on `socket` to a request received whole has been written, at once
   * when there is none. The request the parser was still reading when it refused is left out: its answer
   * is the refusal, and its route, waiting for a body that will never come, writes nothing before it.
   */
  afterOwed (socket: Duplex, write: () => void): void {
    const owed = this.on(socket).filter((response) => response.req.complete && !response.writableFinished)
    let left = owed.length
    if (left === 0) {
      write()
      return
    }
    // 'close' follows 'finish' (the answer handed to the socket), or the connection's end: once either way.
    for (const response of owed) response.once('close', () => { if (--left === 0) write() })
  }

  /**
   * The answer already written to the request the parser is still reading on `socket`, if it was answered before its
   * body (shed, say): a refusal of that body would be a second answer, taken for the next request's.
   */
  answeredBeforeItsBody (socket: Duplex): ServerResponse | undefined {
    const latest = this.#withBody.get(socket)
    return latest !== undefined && !latest.req.complete && latest.headersSent ? latest : undefined
  }

  readonly #track = (request: IncomingMessage, response: ServerResponse): void => {
    // Kept for requests with a body alone (a few admin calls), not for every idle connection's last GET.
    if (request.headers['transfer-encoding'] !== undefined || request.headers['content-length'] !== undefined) this.#withBody.set(request.socket, response)
    // A hit is answered within Fastify's listener, which runs before this one, and its bytes are on the
    // socket ahead of anything written later: nothing to wait for, and nothing spent on it. (An answer
    // queued behind another is ended too but not yet on the socket: `socket` is null until its turn.)
    if (response.writableEnded && response.socket !== null) return
    const socket: Socket = request.socket
    let owed = this.#owed.get(socket)
    if (owed === undefined) {
      owed = new Set()
      this.#owed.set(socket, owed)
    }
    owed.add(response)
    response.once('close', () => owed.delete(response))
  }
}

const trackers = new WeakMap<Server, PendingAnswers>()

/** The server's one tracker, made by whoever asks first (after Fastify's own `request` listener: see above). */
export function pendingAnswers (server: Server): PendingAnswers {
  let tracker = trackers.get(server)
  if (tracker === undefined) {
    tracker = new PendingAnswers(server)
    trackers.set(server, tracker)
  }
  return tracker
}
