import { connect, type Socket } from 'node:net'
import t from 'tap'
import { buildApp, SLOW_CLIENT_TIMEOUTS, type SlowClientTimeouts } from '../../../src/app.ts'
import { eventually, NO_DELAY_SHEDDING, simulator, testConfig, type TestContext } from '../../helper.ts'

// node:http's own timers cut slow clients off; they cannot follow a fake clock, so the limits are short here.
const LIMITS: SlowClientTimeouts = { headersMs: 300, requestMs: 600, checkIntervalMs: 50 }
const ADMIN_TOKEN = 'slow-client-test-admin-token'

async function listening (t: TestContext, loadShedding = NO_DELAY_SHEDDING): Promise<number> {
  const sim = await simulator(t)
  const app = await buildApp({ config: testConfig(t, sim, { ADMIN_TOKEN }), slowClients: LIMITS, loadShedding })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('not listening on a port')
  return address.port
}

/** How often a slow client sends one more byte. */
const DRIP_MS = 50

/**
 * Within twice `limitMs` by the drips counted in this process, whose event loop the server's timers share: a busy
 * machine delays both alike (and a late interval is not made up), so the count holds where a stopwatch would not.
 */
const dripsWithin = (limitMs: number): number => 2 * limitMs / DRIP_MS

/**
 * Writes `head` at once, then one byte of `drip` every DRIP_MS (`halfOpen`: even once the server has ended its side); resolves with what the server sent, when it closed,
 * and how many bytes of `drip` had been sent then.
 */
async function slowClient (port: number, head: string, drip: string, halfOpen = false): Promise<{ answer: string, closedAfterMs: number, dripped: number }> {
  // Half open: it goes on sending after the server has ended its side, as a client busy uploading does.
  const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: halfOpen })
  const started = Date.now()
  let answer = ''
  socket.setEncoding('utf8').on('data', (chunk: string) => { answer += chunk })
  socket.on('error', () => {})
  socket.write(head)
  let sent = 0
  const dripping = setInterval(() => { if (sent < drip.length && socket.writable) socket.write(drip[sent++] ?? '') }, DRIP_MS)
  try {
    await new Promise((resolve) => socket.once('close', resolve))
  } finally {
    clearInterval(dripping)
  }
  return { answer, closedAfterMs: Date.now() - started, dripped: sent }
}

t.test('by default the server allows seconds, not minutes: 10 s for the headers, 15 s for the whole request', async (t) => {
  const sim = await simulator(t)
  const app = await buildApp({ config: testConfig(t, sim), loadShedding: NO_DELAY_SHEDDING })
  t.teardown(() => app.close())
  t.equal(app.server.headersTimeout, SLOW_CLIENT_TIMEOUTS.headersMs)
  t.equal(app.server.requestTimeout, SLOW_CLIENT_TIMEOUTS.requestMs)
  t.ok(SLOW_CLIENT_TIMEOUTS.requestMs <= 15_000 && SLOW_CLIENT_TIMEOUTS.checkIntervalMs <= 1_000)
})

t.test('a client sending its headers a byte at a time gets 408 and loses the connection once the headers limit passes', async (t) => {
  const port = await listening(t)
  const { answer, closedAfterMs, dripped } = await slowClient(port, 'GET /healthz HTTP/1.1\r\n', 'Host: 127.0.0.1\r\nAccept: application/json\r\nX-Padding: ' + 'x'.repeat(200))
  t.match(answer, /^HTTP\/1\.1 408 /)
  t.match(answer, /\r\n\r\n\{"statusCode":408,"code":"REQUEST_TIMEOUT","error":"Request Timeout","message":"The request did not arrive in time"\}$/)
  t.match(answer, /\r\nx-request-id: \S+\r\n/)
  t.match(answer, /\r\nconnection: close\r\n/)
  t.ok(closedAfterMs >= LIMITS.headersMs, `closed after ${closedAfterMs} ms, not before the limit`)
  t.ok(dripped < dripsWithin(LIMITS.headersMs), `cut off after ${dripped} drips, within twice the limit`)
})

t.test('a client whose body trickles gets 408 and loses the connection once the whole-request limit passes', async (t) => {
  const port = await listening(t)
  const head = 'POST /admin/purge/alice HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    `Authorization: Bearer ${ADMIN_TOKEN}\r\nContent-Length: 400\r\n\r\n`
  const { answer, closedAfterMs, dripped } = await slowClient(port, head, '{"padding":"' + 'x'.repeat(380) + '"}')
  t.match(answer, /^HTTP\/1\.1 408 /)
  t.match(answer, /"code":"REQUEST_TIMEOUT"/)
  t.ok(closedAfterMs >= LIMITS.requestMs, `closed after ${closedAfterMs} ms, not before the limit`)
  t.ok(dripped < dripsWithin(LIMITS.requestMs), `cut off after ${dripped} drips, within twice the limit`)
})

t.test('a request answered before its body, whose body then trickles: that answer alone, and cut off once the whole-request limit passes', async (t) => {
  // Shed before its body is read: under pressure from a heap limit every process exceeds.
  const port = await listening(t, { maxHeapUsedBytes: 1, sampleInterval: 10 })
  await eventually(async () => /^HTTP\/1\.1 503 /.test((await slowClient(port, 'GET /profile/alice HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n', '')).answer), 'shedding')
  const head = 'POST /admin/purge/alice HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    `Authorization: Bearer ${ADMIN_TOKEN}\r\nContent-Length: 400\r\n\r\n`
  const { answer, closedAfterMs, dripped } = await slowClient(port, head, '{"padding":"' + 'x'.repeat(380) + '"}', true)
  t.match(answer, /^HTTP\/1\.1 503 /)
  t.equal(answer.match(/HTTP\/1\.1 /g)?.length, 1, 'no 408 after it')
  t.ok(closedAfterMs >= LIMITS.requestMs, `closed after ${closedAfterMs} ms, not before the limit`)
  t.ok(dripped < dripsWithin(LIMITS.requestMs), `cut off after ${dripped} drips, within twice the limit`)
})

t.test('a client that sends its request in time is served', async (t) => {
  const port = await listening(t)
  const { answer } = await slowClient(port, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n', '')
  t.match(answer, /^HTTP\/1\.1 200 /)
})
