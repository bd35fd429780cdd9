import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { pendingAnswers } from '../../src/http/pending-answers.ts'
import { eventually, metric, parseMetrics, stack } from '../helper.ts'

// A caller is gone only when its connection closes: one that sends its request and then shuts its
// writing side (a client or proxy that half-closes) is answered; one that closes outright is seen to
// have gone as soon as the service writes to it (its `102 Processing` probes), and its load is cancelled.

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

/** The final answer's head and body, past any interim (1xx) answers. */
function finalAnswer (text: string): { interim: string[], head: string, body: string } {
  const parts = text.split('\r\n\r\n')
  const interim = parts.filter((part) => /^HTTP\/1\.1 1\d\d /.test(part))
  const [head = '', body = ''] = parts.slice(interim.length)
  return { interim, head, body }
}

const COLD = 'GET /profile/half-closer HTTP/1.1\r\nHost: localhost\r\n\r\n'

t.test('a half-closed request for a cold username is answered once the upstream has, then the connection ends', async (t) => {
  // The upstream takes a while: the half-close reaches the service long before the answer does.
  const { app, sim } = await stack(t, { sim: { latencyMs: 300 } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { interim, head, body } = finalAnswer(await halfClosing(app, COLD).answer)
  t.ok(interim.length >= 1, 'told it is being processed meanwhile')
  t.ok(interim.every((answer) => answer === 'HTTP/1.1 102 Processing'))
  t.match(head, /^HTTP\/1\.1 200 OK/)
  t.match(head, /\r\nx-cache: MISS\r\n/i)
  t.same(Object.keys((JSON.parse(body) as { user: object }).user).length, 10)
  t.equal(sim.callsFor('profile', 'half-closer'), 1, 'the load was not cancelled')
  t.equal(sim.stats.abortedResponses, 0)
})

t.test('a caller that closes its connection outright while its load waits cancels it, seen at the next probe', async (t) => {
  const { app, sim } = await stack(t, { env: { UPSTREAM_TIMEOUT_MS: '30000' } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  sim.failNext({ kind: 'hang' })
  const { socket } = halfClosing(app, COLD)
  await eventually(() => sim.callsFor('profile', 'half-closer') === 1, 'the call is at the upstream')
  socket.destroy()
  await eventually(() => sim.stats.abortedResponses === 1, 'the upstream call is aborted, long before its 30 s deadline')
  const metrics = parseMetrics((await app.inject('/metrics')).body)
  t.equal(metric(metrics, 'pbff_upstream_calls_total', { resource: 'profile', outcome: 'cancelled' }), 1, 'reported as cancelled, not failed')
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
  for (let i = 0; i < 2; i++) t.match(finalAnswer(await halfClosing(app, COLD).answer).head, /^HTTP\/1\.1 200 OK/)
  t.same(tracked, [true, false], 'the miss until it is answered; the hit not at all')
})
