import { spawn, type ChildProcessByStdio } from 'node:child_process'
import { connect } from 'node:net'
import type { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { Agent, request } from 'undici'
import type { Simulator } from '../../dev/simulator.ts'
import { eventually, rawRedis, REDIS_URL, simulator, testPrefix } from '../helper.ts'
import { otlpReceiver } from '../telemetry/otlp-receiver.ts'

const SERVER = new URL('../../src/server.ts', import.meta.url).pathname

// Each test's server is a process of its own and most of each test is waiting on it (its start-up, its signals, the
// drain delay), so the tests run side by side: the file takes about as long as its longest test.
t.jobs = 4

interface Server {
  child: ChildProcessByStdio<null, Readable, Readable>
  url: string
  port: number
  lines: Array<Record<string, unknown>>
  exited: Promise<number | null>
}

/** `src/server.ts` in a process of its own, as `npm start` runs it, in front of `sim`; once it is ready. */
async function startServer (t: Test, sim: Simulator, env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(process.execPath, [SERVER], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: sim.baseUrl,
      AUTH_URL: sim.authUrl,
      CLIENT_ID: sim.options.clientId,
      CLIENT_SECRET: sim.options.clientSecret,
      REDIS_URL,
      CACHE_KEY_PREFIX: testPrefix(t),
      LOG_LEVEL: 'info',
      ...env
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.teardown(async () => {
    if (child.exitCode === null) child.kill('SIGKILL')
    await exited
  })
  const lines: Array<Record<string, unknown>> = []
  let buffered = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk
    const complete = buffered.split('\n')
    buffered = complete.pop() ?? ''
    for (const line of complete) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>)
  })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  await eventually(() => logged(lines, 'Server listening at '), 'the server listening', 30_000).catch((err: unknown) => {
    throw new Error(`the server did not start: ${stderr}`, { cause: err })
  })
  const url = String(lines.find((line) => String(line.msg).startsWith('Server listening at '))?.msg).replace('Server listening at ', '')
  await untilReady(url)
  return { child, url, port: Number(new URL(url).port), lines, exited }
}

/** Whether a line whose message starts with `message` (and which has `fields`) was logged. */
function logged (lines: Array<Record<string, unknown>>, message: string, fields: Record<string, unknown> = {}): boolean {
  return lines.some((line) => String(line.msg).startsWith(message) && Object.entries(fields).every(([key, value]) => line[key] === value))
}

/** Whether a new TCP connection to the port is refused. */
async function refused (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve(false) })
    socket.once('error', () => resolve(true))
  })
}

t.test('SIGHUP, SIGQUIT and SIGUSR2 do not stop the service; with SHUTDOWN_DELAY_MS=0, on SIGTERM the server stops accepting at once, finishes the requests in flight, closes and exits 0', async (t) => {
  const sim = await simulator(t)
  const server = await startServer(t, sim, { SHUTDOWN_DELAY_MS: '0' })
  t.notOk(logged(server.lines, 'SHUTDOWN_TIMEOUT_MS is under'), 'the defaults leave a sent call time to end: no warning')
  for (const signal of ['SIGHUP', 'SIGQUIT', 'SIGUSR2'] as const) {
    server.child.kill(signal)
    await eventually(() => logged(server.lines, 'signal ignored: only SIGTERM or SIGINT stops the service', { signal }), `${signal} logged as ignored`)
    await untilReady(server.url) // never, were the service stopping
  }
  t.equal(server.child.exitCode, null, 'still running')

  // Slow enough to be in flight until the listener has closed, however busy the machine (the order is what is asserted).
  sim.options.latencyMs = 2_000
  const agent = new Agent({ keepAliveTimeout: 60_000 })
  t.teardown(() => agent.close())

  const usernames = ['ann', 'ben', 'cat', 'dan', 'eve']
  let answered = 0
  const inFlight = usernames.map(async (username) => {
    const res = await request(`${server.url}/profile/${username}`, { dispatcher: agent })
    const body = await res.body.json() as { user?: { name?: string } }
    answered++
    return { status: res.statusCode, connection: res.headers.connection, body }
  })
  await eventually(() => sim.stats.dataCalls === usernames.length, 'all five reached the upstream')

  server.child.kill('SIGTERM')
  await eventually(async () => await refused(server.port), 'new connections are refused')
  t.equal(answered, 0, '...while the slow requests are still in flight')

  const results = await Promise.all(inFlight)
  for (const [i, result] of results.entries()) {
    t.equal(result.status, 200, `${usernames[i]}`)
    t.equal(typeof result.body.user?.name, 'string', `${usernames[i]}`)
    t.equal(result.connection, 'close', 'the connection ends with the answer, so the close need not wait for it')
  }
  t.equal(await server.exited, 0)
  const messages = server.lines.map((line) => line.msg)
  const closing = messages.indexOf('closing: finishing the requests in flight')
  const closed = messages.indexOf('closed')
  t.ok(closing >= 0 && closed > closing, 'closing, then closed (Redis and the upstream pools included)')
  t.equal(server.lines.filter((line) => Number(line.level) >= 50).length, 0, 'no error logged')
})

t.test('requests still running after SHUTDOWN_TIMEOUT_MS are abandoned and the process exits 1', async (t) => {
  const sim = await simulator(t)
  sim.failNext({ kind: 'hang' })
  const server = await startServer(t, sim, { SHUTDOWN_DELAY_MS: '0', SHUTDOWN_TIMEOUT_MS: '300' })
  t.ok(logged(server.lines, 'SHUTDOWN_TIMEOUT_MS is under twice UPSTREAM_TIMEOUT_MS', { shutdownTimeoutMs: 300, drainMs: 10_000 }), 'the start warns of it')
  const pending = request(`${server.url}/profile/slowpoke`).then(() => 'answered', () => 'abandoned')
  await eventually(() => sim.stats.dataCalls === 1, 'the request reached the upstream')
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 1)
  t.equal(await pending, 'abandoned')
  t.ok(server.lines.some((line) => line.level === 50 && String(line.msg).includes('killed by timeout')), 'the forced exit is logged')
})

/**
 * Until `/readyz` answers 200: a server process sheds load (503) while its event loop lags, as a fresh one on a busy
 * machine's does; one that is shutting down never answers 200 again.
 */
async function untilReady (url: string): Promise<void> {
  await eventually(async () => (await onNewConnection(`${url}/readyz`)).status === 200, 'ready', 30_000)
}

/** One request on a connection of its own, as a load balancer's health check or a new client makes it. */
async function onNewConnection (url: string): Promise<{ status: number, body: Record<string, unknown> }> {
  const agent = new Agent({ pipelining: 0 })
  try {
    const res = await request(url, { dispatcher: agent })
    return { status: res.statusCode, body: await res.body.json() as Record<string, unknown> }
  } finally {
    await agent.close()
  }
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`on ${signal}, /readyz answers 503 at once while new connections are still served for SHUTDOWN_DELAY_MS; then it closes and exits 0`, async (t) => {
    // Long enough for the checks made within it on a busy machine: that they were is asserted by the order of events.
    const delayMs = 3_000
    const sim = await simulator(t)
    const server = await startServer(t, sim, { SHUTDOWN_DELAY_MS: String(delayMs) })
    // The token is exchanged before the signal: within the delay, only the data call is made.
    t.equal((await onNewConnection(`${server.url}/profile/warm-up`)).status, 200)

    const signalled = Date.now()
    server.child.kill(signal)
    await eventually(() => logged(server.lines, 'shutting down: readiness fails, still serving'), 'the signal received')
    const readiness = await onNewConnection(`${server.url}/readyz`)
    t.equal(readiness.status, 503)
    t.match(readiness.body, { statusCode: 503, code: 'SHUTTING_DOWN', status: 'unavailable' })
    const profile = await onNewConnection(`${server.url}/profile/alice`)
    t.equal(profile.status, 200, 'a data route still answers on a new connection')
    t.equal(typeof (profile.body.user as { name?: unknown } | undefined)?.name, 'string')
    t.equal(sim.callsFor('profile', 'alice'), 1, 'loaded from the upstream during the delay')
    t.notOk(logged(server.lines, 'closing: '), 'all of that before the listener closed')

    t.equal(await server.exited, 0)
    t.ok(Date.now() - signalled >= delayMs, 'the listener closed only after the delay')
    t.ok(await refused(server.port), 'and then refuses connections')
    t.equal(server.lines.filter((line) => Number(line.level) >= 50).length, 0, 'no error logged')
  })
}

t.test('before it listens, a process compiles its request path on a throwaway app that leaves no trace: no upstream call, no Redis key, no access line, no request counted', async (t) => {
  const sim = await simulator(t)
  const prefix = testPrefix(t)
  const server = await startServer(t, sim, { CACHE_KEY_PREFIX: prefix })
  const messages = server.lines.map((line) => String(line.msg))
  const warmed = messages.findIndex((message) => message.startsWith('warmed up: the request path is compiled'))
  const skipped = server.lines.find((line) => String(line.msg).startsWith('warm-up skipped'))
  const why = skipped === undefined ? '' : ` (skipped: ${JSON.stringify(skipped.err)})`
  t.ok(warmed >= 0 && warmed < messages.findIndex((message) => message.startsWith('Server listening at ')), `warmed up, then listening${why}`)
  t.same({ tokens: sim.stats.tokenRequests, calls: sim.stats.dataCalls }, { tokens: 0, calls: 0 }, 'the real upstream saw nothing')
  t.same(await rawRedis(t).keys(`${prefix}*`), [], 'nothing in Redis')
  t.notOk(logged(server.lines, 'request completed', { url: '/profile/warm-up-0' }), 'no access line of the warm-up')
  const metrics = await (await request(`${server.url}/metrics`)).body.text()
  t.notMatch(metrics, /pbff_http_requests_total\{[^}]*route="\/profile/, 'no profile request counted')

  // A username the warm-up loaded: a miss here, so its store was not this instance's.
  const res = await request(`${server.url}/profile/warm-up-0`)
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-cache'], 'MISS', 'the warm-up\'s store was not this instance\'s')
  await res.body.dump()
  t.same({ tokens: sim.stats.tokenRequests, calls: sim.stats.dataCalls }, { tokens: 1, calls: 1 })
  await eventually(() => logged(server.lines, 'request completed', { url: '/profile/warm-up-0' }), 'the access line of a real request, as the warm-up\'s would have been')
})

t.test('with tracing on, the warm-up exports no span: the collector sees the real request alone', async (t) => {
  const sim = await simulator(t)
  const receiver = await otlpReceiver()
  t.teardown(() => receiver.close())
  const server = await startServer(t, sim, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, SHUTDOWN_DELAY_MS: '0' })
  await (await request(`${server.url}/profile/alice`)).body.dump()
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  // The SDK exports what it holds as the process closes.
  t.ok(receiver.spans.some((span) => span.kind === 2 && String(span.attributes['url.path']).startsWith('/profile/alice')), 'the real request traced')
  t.same(receiver.bodies.filter((body) => body.includes('warm-up')), [], 'nothing of the warm-up')
  t.ok(receiver.spans.length < 30, `a request's spans, not the warm-up's 1,200 requests': ${receiver.spans.length}`)
})
