import { connect } from 'node:net'
import t from 'tap'
import { readiness } from '../../src/routes/health.ts'
import { eventually, REDIS_URL, RedisServer, stack } from '../helper.ts'

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

t.test('a failing identity provider is degraded, still 200', async (t) => {
  const { app, sim } = await stack(t)
  sim.failTokenNext({ kind: 'status', status: 500 })
  t.equal((await app.inject('/profile/alice')).statusCode, 502)
  const res = await app.inject('/readyz')
  t.equal(res.statusCode, 200)
  t.same(res.json(), { status: 'degraded', redis: 'not_configured', token: 'failing', breaker: 'closed' })
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
  t.equal(readiness({ ...healthy, breaker: 'open' }, false).status, 'degraded')
  t.equal(readiness({ ...healthy, breaker: 'half_open' }, false).status, 'degraded')
  t.equal(readiness({ redis: 'down', token: 'failing', breaker: 'open' }, false).status, 'degraded',
    'even then: stale entries are still served, and every instance shares the same upstream')
  t.equal(readiness(healthy, true).status, 'unavailable')
})
