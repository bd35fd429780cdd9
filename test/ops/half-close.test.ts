import { connect } from 'node:net'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { stack } from '../helper.ts'

// A caller is gone only when its connection closes: one that sends its request and then shuts its
// writing side (curl with --no-keepalive behind some proxies, a client that half-closes) is answered.

/** Sends `request` on a fresh connection, half-closes it at once, and reads everything until the server closes. */
async function sendAndHalfClose (app: FastifyInstance, request: string): Promise<string> {
  const { port } = app.server.address() as { port: number }
  return await new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true })
    let answer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => { answer += chunk })
    socket.on('end', () => { resolve(answer) })
    socket.on('error', reject)
    socket.end(request)
  })
}

t.test('a half-closed request for a cold username is answered once the upstream has, then the connection ends', async (t) => {
  // The upstream takes a while: the half-close reaches the service long before the answer does.
  const { app, sim } = await stack(t, { sim: { latencyMs: 200 } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const answer = await sendAndHalfClose(app, 'GET /profile/half-closer HTTP/1.1\r\nHost: localhost\r\n\r\n')
  const [head = '', body = ''] = answer.split('\r\n\r\n')
  t.match(head, /^HTTP\/1\.1 200 OK/)
  t.match(head, /\r\nx-cache: MISS\r\n/i)
  t.same(Object.keys((JSON.parse(body) as { user: object }).user).length, 10)
  t.equal(sim.callsFor('profile', 'half-closer'), 1, 'the load was not cancelled')
  t.equal(sim.stats.abortedResponses, 0)
})

t.test('a half-closed connection with no request under way is closed', async (t) => {
  const { app } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.equal(await sendAndHalfClose(app, ''), '', 'nothing is sent, and the server ends its side too')
})
