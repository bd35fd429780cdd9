import { spawn, type ChildProcessByStdio } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { connect } from 'node:net'
import type { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { Agent, request } from 'undici'
import type { Simulator } from '../../dev/simulator.js'
import { simulator } from '../helper.js'

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const SERVER = new URL('../../src/server.ts', import.meta.url).pathname

interface Server {
  child: ChildProcessByStdio<null, Readable, Readable>
  url: string
  port: number
  lines: Array<Record<string, unknown>>
  exited: Promise<number | null>
}

/** `src/server.ts` in a process of its own, as `npm start` runs it, in front of `sim`. */
async function startServer (t: Test, sim: Simulator, env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: sim.baseUrl,
      AUTH_URL: sim.authUrl,
      CLIENT_ID: sim.options.clientId,
      CLIENT_SECRET: sim.options.clientSecret,
      REDIS_URL,
      CACHE_KEY_PREFIX: `pbff-test:${randomUUID()}:`,
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
  const listening = await waitFor(() => lines.find((line) => String(line.msg).startsWith('Server listening at ')), 30_000)
  if (listening === undefined) throw new Error(`the server did not start: ${stderr}`)
  const url = String(listening.msg).replace('Server listening at ', '')
  return { child, url, port: Number(new URL(url).port), lines, exited }
}

/** Polls `check` every 10 ms until it returns something, at most `ms`. */
async function waitFor<T> (check: () => T | undefined, ms: number): Promise<T | undefined> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(10)) {
    const value = check()
    if (value !== undefined) return value
  }
  return check()
}

/** Whether a new TCP connection to the port is refused. */
async function refused (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve(false) })
    socket.once('error', () => resolve(true))
  })
}

t.test('with SHUTDOWN_DELAY_MS=0, on SIGTERM the server stops accepting at once, finishes the requests in flight, closes and exits 0', async (t) => {
  const sim = await simulator(t, { latencyMs: 1_500 })
  const server = await startServer(t, sim, { SHUTDOWN_DELAY_MS: '0' })
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
  t.ok(await waitFor(() => sim.stats.dataCalls === usernames.length || undefined, 10_000), 'all five reached the upstream')

  server.child.kill('SIGTERM')
  let stoppedAccepting = false
  for (const deadline = Date.now() + 1_000; !stoppedAccepting && Date.now() < deadline; await sleep(10)) {
    stoppedAccepting = await refused(server.port)
  }
  t.ok(stoppedAccepting, 'new connections are refused')
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
  const pending = request(`${server.url}/profile/slowpoke`).then(() => 'answered', () => 'abandoned')
  t.ok(await waitFor(() => sim.stats.dataCalls === 1 || undefined, 10_000), 'the request reached the upstream')
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 1)
  t.equal(await pending, 'abandoned')
  t.ok(server.lines.some((line) => line.level === 50 && String(line.msg).includes('killed by timeout')), 'the forced exit is logged')
})

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
    const delayMs = 1_500
    const sim = await simulator(t)
    const server = await startServer(t, sim, { SHUTDOWN_DELAY_MS: String(delayMs) })
    t.equal((await onNewConnection(`${server.url}/readyz`)).status, 200)

    const signalled = Date.now()
    server.child.kill(signal)
    const shuttingDown = await waitFor(() => server.lines.find((line) => line.msg === 'shutting down: readiness fails, still serving'), 5_000)
    t.ok(shuttingDown, 'the signal was received')
    const readiness = await onNewConnection(`${server.url}/readyz`)
    t.equal(readiness.status, 503)
    t.match(readiness.body, { statusCode: 503, code: 'SHUTTING_DOWN', status: 'unavailable' })
    const profile = await onNewConnection(`${server.url}/profile/alice`)
    t.equal(profile.status, 200, 'a data route still answers on a new connection')
    t.equal(typeof (profile.body.user as { name?: unknown } | undefined)?.name, 'string')
    t.ok(Date.now() - signalled < delayMs, 'all of that within the delay')

    t.equal(await server.exited, 0)
    t.ok(Date.now() - signalled >= delayMs, 'the listener closed only after the delay')
    t.ok(await refused(server.port), 'and then refuses connections')
    t.equal(server.lines.filter((line) => Number(line.level) >= 50).length, 0, 'no error logged')
  })
}

t.test('SIGHUP, SIGQUIT and SIGUSR2 do not stop the service', async (t) => {
  const sim = await simulator(t)
  const server = await startServer(t, sim, { SHUTDOWN_DELAY_MS: '0' })
  for (const signal of ['SIGHUP', 'SIGQUIT', 'SIGUSR2'] as const) {
    server.child.kill(signal)
    const ignored = await waitFor(() => server.lines.find((line) => line.signal === signal && line.msg === 'signal ignored: only SIGTERM or SIGINT stops the service'), 5_000)
    t.ok(ignored, `${signal} logged as ignored`)
    t.equal((await onNewConnection(`${server.url}/readyz`)).status, 200, `still ready after ${signal}`)
  }
  t.equal(server.child.exitCode, null, 'still running')
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})
