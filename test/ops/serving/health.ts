import { connect } from 'node:net'
import t from 'tap'
import { readiness } from '../../../src/routes/health.ts'
import { Clock, eventually, metric, parseMetrics, REDIS_URL, RedisServer, settle, stack } from '../../helper.ts'

t.test('/healthz answers 200 while the process runs', async (t) => {
  const { app } = await stack(t)
  const res = await app.inject('/healthz')
  t.equal(res.statusCode, 200)
  t.same(res.json(), { status: 'ok' })
})

t.test('/readyz reports Redis, the token and the breaker; ready when all is well', async (t) => {
  const { app } = await stack(t)
  const cold = await app.inject('/readyz')
  t.equal(cold.statusCode, 200)
  t.equal(cold.headers['cache-control'], 'no-store')
  t.same(cold.json(), { status: 'ready', redis: 'not_configured', token: 'none', breaker: 'closed' })
  await app.inject('/profile/alice')
  t.same((await app.inject('/readyz')).json(), { status: 'ready', redis: 'not_configured', token: 'held', breaker: 'closed' })
})

t.test('/readyz says Redis is up when it is', async (t) => {
  const { app } = await stack(t, { env: { REDIS_URL } })
  await eventually(() => app.redisLayer?.bus.ready === true, 'redis and its bus up')
  t.same((await app.inject('/readyz')).json(), { status: 'ready', redis: 'up', bus: 'up', token: 'none', breaker: 'closed' })
})

t.test('a Redis outage is degraded but still 200, and ready again once Redis is back', async (t) => {
  const redis = await RedisServer.start(t)
  const { app } = await stack(t, { env: { REDIS_URL: redis.url } })
  await eventually(() => app.redisLayer?.health.up === true, 'redis up')
  t.equal((await app.inject('/readyz')).json().redis, 'up')

  await redis.stop()
  await eventually(() => app.redisLayer?.health.up === false, 'the health state notices')
  const down = await app.inject('/readyz')
  t.equal(down.statusCode, 200, 'the instance still serves, from the upstream')
  t.same(down.json(), { status: 'degraded', redis: 'down', bus: 'down', token: 'none', breaker: 'closed' })
  t.equal((await app.inject('/profile/alice')).statusCode, 200)

  await redis.start()
  await eventually(() => app.redisLayer?.bus.ready === true, 'the probe sees it back, and the bus')
  t.same((await app.inject('/readyz')).json(), { status: 'ready', redis: 'up', bus: 'up', token: 'held', breaker: 'closed' })
})

t.test('a failing identity provider is degraded, still 200, and /readyz says why', async (t) => {
  const { app, sim } = await stack(t)
  sim.failTokenNext({ kind: 'status', status: 500 })
  t.equal((await app.inject('/profile/alice')).statusCode, 502)
  const res = await app.inject('/readyz')
  t.equal(res.statusCode, 200)
  t.same(res.json(), {
    status: 'degraded',
    redis: 'not_configured',
    token: 'failing',
    breaker: 'closed',
    tokenReason: 'Could not authenticate with the profile service: the identity provider answered 500'
  }, 'with the reason, which holds neither the secret nor a token')
})

t.test('while an exchange hangs, /readyz turns degraded once it is overdue and stays so, with a reason', async (t) => {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now })
  sim.failTokenNext({ kind: 'hang' })
  const hung = app.inject('/profile/first')
  await eventually(() => sim.stats.tokenRequests === 1, 'the exchange hangs at the identity provider')
  const statuses: string[] = []
  for (let atMs = 100; atMs <= 6_000; atMs += 100) {
    clock.advance(100)
    const report = (await app.inject('/readyz')).json()
    statuses.push(report.status)
    if (report.status === 'degraded') t.match(report, { token: 'failing', tokenReason: 'the identity provider has not answered the current exchange' })
  }
  const firstDegraded = statuses.indexOf('degraded')
  t.ok(firstDegraded >= 9 && firstDegraded <= 19, `ready while the exchange was young, degraded from ${(firstDegraded + 1) * 100} ms`)
  t.ok(statuses.slice(firstDegraded).every((status) => status === 'degraded'), 'and never back to ready while it hangs')
  t.equal((await app.inject('/profile/next')).statusCode, 200, 'the next caller gives up on it and gets a token')
  t.equal((await hung).statusCode, 502)
})

t.test('a hung identity provider: its callers told at the exchange\'s 1 s deadline, the next refused at once during the back-off, degraded with a reason, no flapping, recovered within 3 s', async (t) => {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now })
  sim.failTokenNext({ kind: 'hang' }) // the first exchange hangs; the provider answers every later one
  const waiting = [app.inject('/profile/first')]
  await eventually(() => sim.stats.tokenRequests === 1, 'the first exchange hangs at the identity provider')
  const reports: Array<Record<string, unknown>> = []
  const probe = async (): Promise<void> => { reports.push((await app.inject('/readyz')).json()) }
  // A readiness probe and a lookup every 100 ms of the app's clock; the lookups wait for the exchange under way.
  for (let atMs = 100; atMs < 1_000; atMs += 100) {
    clock.advance(100)
    await probe()
    waiting.push(app.inject(`/profile/at-${atMs}`))
    await settle()
  }
  clock.advance(100)
  await probe()
  // From the exchange's deadline on, each lookup is answered without the clock moving: refused at once during the
  // back-off (1 to 2 s after the failure), until the first after it starts the retry, which the provider answers.
  const answered: Array<{ atMs: number, status: number, code?: string }> = []
  for (let atMs = 1_000; atMs <= 3_500 && answered.at(-1)?.status !== 200; atMs += 100) {
    if (atMs > 1_000) {
      clock.advance(100)
      await probe()
    }
    const res = await app.inject(`/profile/at-${atMs}`)
    answered.push({ atMs, status: res.statusCode, ...(res.statusCode !== 200 && { code: res.json().code }) })
  }
  const told = await Promise.all(waiting)
  t.same(told.map((res) => [res.statusCode, res.json().code]), told.map(() => [502, 'UPSTREAM_AUTH_FAILED']),
    'the callers of the hung exchange were told when it was given up, at its deadline')
  const recoveredAtMs = answered.at(-1)?.atMs ?? Infinity
  t.equal(answered.at(-1)?.status, 200, 'the lookup that started the retry got the next token')
  t.ok(answered.slice(0, -1).every(({ status, code }) => status === 502 && code === 'UPSTREAM_AUTH_FAILED'), 'the lookups during the back-off were refused at once')
  t.ok(recoveredAtMs >= 2_000 && recoveredAtMs <= 3_000,
    `served ${recoveredAtMs} ms after the hang began: its 1 s deadline, then a back-off of 1 to 2 s, within the 3 s promised`)
  t.equal(sim.stats.tokenRequests, 2, 'no exchange during the back-off')
  const refusedAtOnce = metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_refusals_total', { reason: 'no-token' })
  t.equal(refusedAtOnce, answered.length - 1, 'each refusal counted as one answered at once')
  t.equal(app.tokens.state, 'held')
  await probe()

  const statuses = reports.map((report) => report.status)
  t.same(statuses.slice(0, 9), Array(9).fill('ready'), 'ready while the exchange was young')
  const changes = statuses.filter((status, i) => i > 0 && status !== statuses[i - 1]).length
  t.ok(statuses[9] === 'degraded' && changes === 2 && statuses.at(-1) === 'ready', `degraded from its deadline, then ready: ${statuses.join(' ')}`)
  t.same(reports.at(-1), { status: 'ready', redis: 'not_configured', token: 'held', breaker: 'closed' })
  for (const report of reports.filter(({ status }) => status === 'degraded')) {
    t.match(report, { token: 'failing', tokenReason: /the identity provider (has not answered|did not answer)/ })
  }
})

t.test('an open breaker is degraded, still 200: cached and stale entries are still served', async (t) => {
  const { app, sim } = await stack(t)
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  sim.failAlways({ kind: 'status', status: 500 })
  for (let i = 1; i <= 5; i++) await app.inject(`/profile/failing-${i}`)
  const res = await app.inject('/readyz')
  t.equal(res.statusCode, 200)
  t.same(res.json(), { status: 'degraded', redis: 'not_configured', token: 'held', breaker: 'open' })
  t.equal((await app.inject('/profile/alice')).statusCode, 200, 'alice is still served from the cache')
})

t.test('while shutting down, /readyz answers 503 SHUTTING_DOWN with the state, so the balancer drains the instance', async (t) => {
  const { app } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  // A connection whose request has begun is not idle: the close waits for it, and it is answered.
  let begun = false
  app.server.once('connection', (serverSide) => serverSide.once('data', () => { begun = true }))
  const socket = connect(port, '127.0.0.1')
  let answer = ''
  socket.setEncoding('utf8').on('data', (chunk: string) => { answer += chunk })
  const ended = new Promise((resolve) => socket.once('close', resolve))
  socket.write('GET /readyz HTTP/1.1\r\nHost: bff\r\n')
  // The server's parser reads the bytes before this listener (added after its own) hears them.
  await eventually(() => begun, 'the request has begun')

  const closed = app.close()
  await eventually(() => app.closing, 'closing')
  socket.write('\r\n')
  await ended
  await closed
  const [head = '', body = ''] = answer.split('\r\n\r\n')
  t.match(head, /^HTTP\/1\.1 503 /)
  t.match(head, /\r\nconnection: close\r\n/i)
  t.same(JSON.parse(body), {
    statusCode: 503,
    code: 'SHUTTING_DOWN',
    error: 'Service Unavailable',
    message: 'The service is shutting down',
    status: 'unavailable',
    redis: 'not_configured',
    token: 'none',
    breaker: 'closed'
  })
})

t.test('readiness: 503 only while closing; Redis down, token failing or breaker not closed are degraded', async (t) => {
  const healthy = { redis: 'up', token: 'held', breaker: 'closed' } as const
  t.equal(readiness(healthy, false).status, 'ready')
  t.equal(readiness({ ...healthy, redis: 'not_configured' }, false).status, 'ready')
  t.equal(readiness({ ...healthy, token: 'none' }, false).status, 'ready')
  t.equal(readiness({ ...healthy, token: 'renewing' }, false).status, 'ready')
  t.equal(readiness({ ...healthy, redis: 'down' }, false).status, 'degraded')
  t.equal(readiness({ ...healthy, token: 'failing' }, false).status, 'degraded')
  t.same(readiness({ ...healthy, token: 'failing', tokenReason: 'why' }, false), { status: 'degraded', ...healthy, token: 'failing', tokenReason: 'why' })
  t.equal(readiness({ ...healthy, breaker: 'open' }, false).status, 'degraded')
  t.equal(readiness({ ...healthy, breaker: 'half_open' }, false).status, 'degraded')
  t.equal(readiness({ redis: 'down', token: 'failing', breaker: 'open' }, false).status, 'degraded',
    'even then: stale entries are still served, and every instance shares the same upstream')
  t.equal(readiness(healthy, true).status, 'unavailable')
})
