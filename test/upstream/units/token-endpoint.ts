import { createServer as createHttpServer } from 'node:http'
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net'
import { Writable } from 'node:stream'
import pino from 'pino'
import t from 'tap'
import { loggerOptions } from '../../../src/logging/logging.ts'
import { noTelemetry } from '../../../src/telemetry/telemetry.ts'
import { originConnection } from '../../../src/upstream/origin-pool.ts'
import { TokenEndpoint } from '../../../src/upstream/token-endpoint.ts'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import { EXCHANGE_DEADLINE_MS } from '../../../src/upstream/token-timing.ts'
import { simulator, type TestContext } from '../../helper.ts'

// A provider that hung and came back answering new connections only: an exchange then must not take a connection
// kept from the hang (a pool reconnects ahead of its next request), or it waits its whole deadline for nothing.

/** Holds every connection it accepts, unread, until opened; then pipes new ones to `target` (the held ones stay dead). */
async function gate (t: TestContext, target: URL): Promise<{ url: string, accepted: () => number, open: () => void }> {
  const sockets = new Set<Socket>()
  let accepted = 0
  let open = false
  const server = createServer({ pauseOnConnect: true }, (socket) => {
    accepted++
    sockets.add(socket)
    socket.on('error', () => {})
    if (!open) return
    const upstream = createConnection({ host: target.hostname, port: Number(target.port) })
    upstream.on('error', () => socket.destroy())
    socket.pipe(upstream).pipe(socket)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, accepted: () => accepted, open: () => { open = true } }
}

t.test('after a hung provider answers again on new connections only, the next exchange gets a token at once', async (t) => {
  const sim = await simulator(t)
  const provider = await gate(t, new URL(sim.authUrl))
  const endpoint = new TokenEndpoint({
    connection: () => originConnection(provider.url, EXCHANGE_DEADLINE_MS),
    tokenPath: '/oauth/token',
    clientId: sim.options.clientId,
    clientSecret: sim.options.clientSecret,
    audience: sim.options.audience,
    defaultTtlSeconds: 3600,
    timeoutMs: EXCHANGE_DEADLINE_MS
  })
  // Each attempt waits out its deadline, as in production: the connection it leaves behind is what this is about.
  for (const attempt of [1, 2]) {
    await t.rejects(endpoint.exchange(), { code: 'UPSTREAM_AUTH_FAILED', message: /did not answer/ }, `attempt ${attempt}: the provider hangs`)
  }
  t.ok(provider.accepted() >= 2, `${provider.accepted()} connections held`)
  provider.open()
  t.match(await endpoint.exchange(), { value: /\S/ }, 'a token, within the deadline a dead connection would have used up')
  t.equal(sim.stats.tokenRequests, 1, 'from the one exchange made after the return')
})

/** The endpoint of an identity provider that answers every exchange 200 with `body`; closed with the test. */
async function providerAnswering (t: TestContext, contentType: string, body: string): Promise<TokenEndpoint> {
  const provider = createHttpServer((_request, response) => { response.writeHead(200, { 'content-type': contentType }).end(body) })
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { provider.close() })
  return new TokenEndpoint({
    connection: () => originConnection(`http://127.0.0.1:${(provider.address() as AddressInfo).port}`, EXCHANGE_DEADLINE_MS),
    tokenPath: '/oauth/token',
    clientId: 'id',
    clientSecret: 'secret',
    audience: 'audience',
    defaultTtlSeconds: 3600,
    timeoutMs: EXCHANGE_DEADLINE_MS
  })
}

t.test('a 200 whose body is not JSON (the bare token, say) fails the exchange, and no part of that body reaches a log line', async (t) => {
  const TOKEN = 'Zx9fK2pQ7mWvB4nR1tY8'
  for (const body of [TOKEN, `${TOKEN}-${'x'.repeat(40)}`, `{"access_token": ${TOKEN}}`]) {
    const endpoint = await providerAnswering(t, 'text/plain', body)
    const lines: string[] = []
    const log = pino(loggerOptions('debug'), new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(chunk.toString('utf8')); done() } }))
    const tokens = new TokenManager({ endpoint, telemetry: noTelemetry, log, lockWaitMs: 1_000 })
    await t.rejects(tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED', message: /answered no JSON/ })
    t.match(lines.join(''), /token exchange failed/, 'the failure is logged')
    t.notMatch(lines.join(''), TOKEN.slice(0, 10), `${body.slice(0, 12)}...: not a piece of the body in the log`)
  }
})

t.test('an access_token no header can carry (a line break, a non-ASCII character) fails the exchange, not every call after it', async (t) => {
  for (const token of ['abc\r\nX-Injected: 1', 'abc\u00e9', 'abc\u0000']) {
    const endpoint = await providerAnswering(t, 'application/json', JSON.stringify({ access_token: token, expires_in: 3600 }))
    await t.rejects(endpoint.exchange(), { code: 'UPSTREAM_AUTH_FAILED', message: /no header can carry/ }, JSON.stringify(token))
  }
})
