import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { pendingAnswers } from '../../../src/http/pending-answers.ts'
import { stack } from '../../helper.ts'

// A caller is gone only when its connection closes: one that sends its request and then shuts its
// writing side (a client or proxy that half-closes) gets its final answer, and nothing before it: no interim
// (1xx) answer it did not ask for (Python's http.client, for one, takes a 102 for the final answer).

/** A fresh connection to the app that sends `request` and half-closes at once; `answer` is all it reads until the server closes. */
function halfClosing (app: FastifyInstance, request: string): { socket: Socket, answer: Promise<string> } {
  const { port } = app.server.address() as { port: number }
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true })
  const answer = new Promise<string>((resolve, reject) => {
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => { text += chunk })
    socket.on('end', () => { resolve(text) })
    socket.on('error', reject)
  })
  socket.end(request)
  return { socket, answer }
}

/** Every status line in what the client read: one per answer, interim (1xx) ones included. */
function statusLines (text: string): string[] {
  return text.split('\r\n').filter((line) => /^HTTP\/\d\.\d \d{3}/.test(line))
}

/** The answer's head and body. */
function answerOf (text: string): { head: string, body: string } {
  const [head = '', body = ''] = text.split('\r\n\r\n')
  return { head, body }
}

const COLD = 'GET /profile/half-closer HTTP/1.1\r\nHost: localhost\r\n\r\n'

t.test('a half-closed request for a cold username gets one answer, its 200, and no interim answer, then the connection ends', async (t) => {
  // The upstream takes a while: the half-close reaches the service long before the answer does.
  const { app, sim } = await stack(t, { sim: { latencyMs: 300 } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const text = await halfClosing(app, COLD).answer
  t.same(statusLines(text), ['HTTP/1.1 200 OK'], 'exactly one status line')
  t.notMatch(text, /HTTP\/1\.1 102/)
  const { head, body } = answerOf(text)
  t.match(head, /\r\nx-cache: MISS\r\n/i)
  t.same(Object.keys((JSON.parse(body) as { user: object }).user).length, 10)
  t.equal(sim.callsFor('profile', 'half-closer'), 1, 'the load was not cancelled')
  t.equal(sim.stats.abortedResponses, 0)
})

t.test('a half-closed connection with no request under way is closed', async (t) => {
  const { app } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.equal(await halfClosing(app, '').answer, '', 'nothing is sent, and the server ends its side too')
})

t.test('answers are tracked only while not on the socket: a hit, answered within Fastify\'s listener, is never tracked', async (t) => {
  const { app } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const tracked: boolean[] = []
  // Registered after the tracker's own listener: sees what it kept.
  app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    tracked.push(pendingAnswers(app.server).on(request.socket).includes(response))
  })
  for (let i = 0; i < 2; i++) t.same(statusLines(await halfClosing(app, COLD).answer), ['HTTP/1.1 200 OK'])
  t.same(tracked, [true, false], 'the miss until it is answered; the hit not at all')
})
