import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { EXPECTATION_FAILED, MALFORMED_REQUEST, URI_TOO_LONG } from '../errors.ts'
import { refusal, timedOut, type ClientError } from '../http/client-errors.ts'
import { errorResponse } from '../http/error-response.ts'
import { answerAndClose } from '../http/linger.ts'
import { pendingAnswers } from '../http/pending-answers.ts'
import { rawErrorAnswer } from '../http/raw-answer.ts'
import { MAX_REQUEST_LINE_OCTETS, requestLineOctets } from '../http/request-line.ts'
import { requestId } from '../logging/logging.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Answers a request node:http's parser refused (Fastify's `clientErrorHandler`). */
    answerClientError: (error: ClientError, socket: Duplex) => void
  }
}

/** The one expectation a server may meet: that it says 100 Continue before the body is sent (RFC 9110, 10.1.1). */
const CONTINUE = /^100-continue$/i

/**
 * The answers at the edges of HTTP, on the contract like any other: requests node:http's parser refuses
 * (malformed, headers too large, too slow), a CONNECT (node:http hands its socket over, and answers
 * nothing), and the framing checks node:http leaves to the server (the request line's length, a Host
 * header, an unmet Expect, a request line with no version), which route through Fastify and its error
 * handler. A refusal written to the socket waits for the answers owed to the requests before it there.
 */
async function httpEdges (app: FastifyInstance): Promise<void> {
  const pending = pendingAnswers(app.server)
  /** Connections whose refusal is written or waiting to be: the parser reports each later chunk, and a timeout, again. */
  const refused = new WeakSet<Duplex>()
  /** The refusal goes out after the answers to the requests before it on the connection, in order, then the connection closes. */
  const refuse = (socket: Duplex, answer: () => string, cutOff: boolean): void => {
    refused.add(socket)
    pending.afterOwed(socket, () => { if (socket.writable) answerAndClose(socket, answer(), cutOff) })
  }

  app.decorate('answerClientError', (error: ClientError, socket: Duplex) => {
    // A reset connection, or one already answered: nothing to write.
    if (error.code === 'ECONNRESET' || !socket.writable || refused.has(socket)) return
    const answered = pending.answeredBeforeItsBody(socket)
    if (answered !== undefined) {
      refused.add(socket)
      app.log.info({ code: error.code }, 'request refused by the HTTP parser after it was answered: the connection closes')
      // After that answer, unless it closed the connection itself (Connection: close).
      const close = (): void => { if (socket.writable) answerAndClose(socket, '', timedOut(error)) }
      if (answered.writableFinished) close()
      else answered.once('close', close)
      return
    }
    const id = randomUUID()
    const body = errorResponse(refusal(error))
    // Never the error itself: its rawPacket holds the caller's bytes, credentials included.
    app.log.info({ reqId: id, code: error.code, statusCode: body.statusCode }, 'request refused by the HTTP parser')
    refuse(socket, () => rawErrorAnswer(body, app.answerHeaders.of({}, id)), timedOut(error))
  })

  app.server.on('connect', (request: IncomingMessage, socket: Duplex) => {
    // node:http handed the socket over with no error listener left: a client's reset must not take the process down.
    socket.on('error', () => {})
    const id = requestId(request)
    const error = app.noRouteError(request.method ?? 'CONNECT', request.url ?? '')
    const headers = app.answerHeaders.of(request.headers, id)
    if (error.allow !== undefined) headers.allow = error.allow
    const body = errorResponse(error)
    // Plain fields: a `req` goes through the request serializer, made for Fastify's requests.
    app.log.info({ reqId: id, method: request.method, statusCode: body.statusCode }, 'CONNECT answered as a request no route has: this is no proxy')
    refuse(socket, () => rawErrorAnswer(body, headers), false)
  })
  // The answer to an unmet expectation goes through Fastify (hooks, logs, metrics): the hook below sends it.
  app.server.on('checkExpectation', (request, response) => { app.routing(request, response) })

  app.addHook('onRequest', (request, reply, done) => {
    const { method = '', url = '', headers, httpVersion, httpVersionMajor } = request.raw
    if (httpVersionMajor !== 1) {
      // A request line without a version, which node:http takes for HTTP/0.9 and would otherwise route.
      reply.header('connection', 'close')
      done(new MALFORMED_REQUEST('the request line names no HTTP/1.x version'))
    } else if (requestLineOctets(method, url) > MAX_REQUEST_LINE_OCTETS) {
      done(new URI_TOO_LONG(MAX_REQUEST_LINE_OCTETS))
    } else if (headers.host === undefined && httpVersion === '1.1') {
      reply.header('connection', 'close')
      done(new MALFORMED_REQUEST('an HTTP/1.1 request needs a Host header'))
    } else if (headers.expect !== undefined && !CONTINUE.test(headers.expect)) {
      // Its body, if one follows, is never read.
      reply.header('connection', 'close')
      done(new EXPECTATION_FAILED())
    } else {
      done()
    }
  })
}

export default fp(httpEdges, { name: 'http-edges', dependencies: ['answer-headers', 'error-handler'] })
