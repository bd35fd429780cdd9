import { connect } from 'node:net'
import t from 'tap'
import { readiness } from '../../../src/routes/health.ts'
import { Clock, eventually, REDIS_URL, RedisServer, settle, stack } from '../../helper.ts'

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
  await eventually(() => app.redisLayer?.health.up === true, 'redis up')
  t.same((await app.inject('/readyz')).json(), { status: 'ready', redis: 'up', token: 'none', breaker: 'closed' })
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
  t.same(down.json(), { status: 'degraded', redis: 'down', token: 'none', breaker: 'closed' })
  t.equal((await app.inject('/profile/alice')).statusCode, 200)

  await redis.start()
  await eventually(() => app.redisLayer?.health.up === true, 'the probe sees it back')
  t.same((await app.inject('/readyz')).json(), { status: 'ready', redis: 'up', token: 'held', breaker: 'closed' })
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

t.test('a hung identity provider: degraded with a reason once its exchange is overdue, no flapping, recovered within 2 s', async (t) => {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now })
  sim.failTokenNext({ kind: 'hang' }) // the first exchange hangs; the provider answers every later one
  const lookups = [{ atMs: 0, answer: app.inject('/profile/first') }]
  await eventually(() => sim.stats.tokenRequests === 1, 'the first exchange hangs at the identity provider')
  const reports: Array<Record<string, unknown>> = []
  // A readiness probe and a lookup every 100 ms of the app's clock, until a lookup gives up on the hung exchange.
  for (let atMs = 100; atMs <= 5_000 && app.tokens.failure?.includes('did not answer in time') !== true; atMs += 100) {
    clock.advance(100)
    reports.push((await app.inject('/readyz')).json())
    lookups.push({ atMs, answer: app.inject(`/profile/at-${atMs}`) })
    await settle()
  }
  await eventually(() => app.tokens.state === 'held', 'the next exchange is answered')
  reports.push((await app.inject('/readyz')).json())

  const answers = await Promise.all(lookups.map(async ({ atMs, answer }) => ({ atMs, status: (await answer).statusCode })))
  const recovered = answers.filter(({ status }) => status === 200)
  t.same(recovered.map(({ atMs }) => atMs), [answers.at(-1)?.atMs], 'the lookup that gave up on the hung exchange got the next token')
  t.ok((recovered[0]?.atMs ?? Infinity) <= 2_000, `served ${recovered[0]?.atMs} ms after the provider answered again`)
  t.ok(answers.slice(0, -1).every(({ status }) => status === 502), 'the callers of the hung exchange were told when it was given up')
  t.equal(sim.stats.tokenRequests, 2)

  const statuses = reports.map((report) => report.status)
  const changes = statuses.filter((status, i) => i > 0 && status !== statuses[i - 1]).length
  t.ok(statuses[0] === 'ready' && changes === 2 && statuses.at(-1) === 'ready', `ready, then degraded, then ready: ${statuses.join(' ')}`)
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
