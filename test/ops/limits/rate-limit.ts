import type { FastifyInstance } from 'fastify'
import type { Command } from 'ioredis'
import t from 'tap'
import { ADD_COUNTS } from '../../../src/rate-limit/shared-rate-counts.ts'
import { anotherApp, capturedLogger, Clock, eventually, freePort, metric, parseMetrics, rawRedis, REDIS_URL, stack } from '../../helper.ts'

/** Settles once `app` has sent its next sync of the rate limit's counts and read the answer. */
async function nextSync (app: FastifyInstance): Promise<void> {
  const client = app.redisLayer?.client
  if (client === undefined) throw new Error('the app has no Redis')
  const original = client.sendCommand
  const answered = new Promise<unknown>((resolve) => {
    client.sendCommand = function (this: typeof client, command: Command, ...rest: unknown[]) {
      if (command.name === 'eval' && command.args[0] === ADD_COUNTS) {
        client.sendCommand = original
        command.promise.then(resolve, resolve)
      }
      return (original as (...args: unknown[]) => unknown).call(this, command, ...rest)
    } as typeof client.sendCommand
  })
  await answered
  // The sync takes the answer in after this reply's own callbacks.
  await new Promise(setImmediate)
}

t.test('past RATE_LIMIT_PER_MINUTE a client gets 429 RATE_LIMITED with Retry-After, and the upstream is not asked', async (t) => {
  const { app, sim } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '3' } })
  for (const remaining of ['2', '1', '0']) {
    const res = await app.inject('/profile/alice')
    t.equal(res.statusCode, 200)
    t.equal(res.headers['x-ratelimit-limit'], '3')
    t.equal(res.headers['x-ratelimit-remaining'], remaining)
  }
  const callsBefore = sim.stats.dataCalls
  const res = await app.inject('/profile/bob')
  t.equal(res.statusCode, 429)
  const retryAfter = Number(res.headers['retry-after'])
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`)
  t.same(res.json(), { statusCode: 429, code: 'RATE_LIMITED', error: 'Too Many Requests', message: `Too many requests: retry in ${retryAfter} s` })
  t.equal(res.headers['cache-control'], 'no-store')
  t.equal(sim.stats.dataCalls, callsBefore, 'a refused request costs the upstream nothing')
})

t.test('health, readiness, metrics and docs are never counted nor refused', async (t) => {
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '1' } })
  for (let round = 0; round < 3; round++) {
    for (const url of ['/healthz', '/readyz', '/metrics', '/docs', '/docs/json']) {
      const res = await app.inject(url)
      t.equal(res.statusCode, 200, `${url} #${round + 1}`)
      t.equal(res.headers['x-ratelimit-remaining'], undefined, url)
    }
  }
  t.equal((await app.inject('/profile/alice')).statusCode, 200, 'the budget is untouched')
  t.equal((await app.inject('/profile/alice')).statusCode, 429)
})

t.test('clients are told apart by address; X-Forwarded-For counts only with TRUST_PROXY', async (t) => {
  const proxied = (app: Awaited<ReturnType<typeof stack>>['app'], client: string) =>
    app.inject({ url: '/profile/alice', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': client } })

  const trusting = (await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '1', TRUST_PROXY: 'true' } })).app
  t.equal((await proxied(trusting, '203.0.113.1')).statusCode, 200)
  t.equal((await proxied(trusting, '203.0.113.2')).statusCode, 200, 'another client behind the same proxy has its own budget')
  t.equal((await proxied(trusting, '203.0.113.1')).statusCode, 429)

  const direct = (await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '1', TRUST_PROXY: 'false' } })).app
  t.equal((await proxied(direct, '203.0.113.1')).statusCode, 200)
  t.equal((await proxied(direct, '203.0.113.2')).statusCode, 429, 'a forged X-Forwarded-For does not buy a new budget')
  const other = await direct.inject({ url: '/profile/alice', remoteAddress: '10.0.0.2' })
  t.equal(other.statusCode, 200, 'another address has its own budget')
})

t.test('a client past its limit is counted and summed up in the log, not given a warn line with a stack a request', async (t) => {
  const { logger, lines } = capturedLogger()
  const clock = new Clock()
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '2' }, logger: { ...logger, level: 'info' }, now: clock.now })
  const statuses = []
  for (let i = 0; i < 12; i++) statuses.push((await app.inject('/profile/alice')).statusCode)
  t.same(statuses, [200, 200, ...Array<number>(10).fill(429)])
  t.equal(metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_refusals_total', { reason: 'rate-limited' }), 10)
  t.equal(lines.filter((line) => line.level === 40 && line.msg.startsWith('Too many requests')).length, 0, 'no warn line each')
  t.equal(lines.filter((line) => line.msg === 'request completed' && line.statusCode === 429).length, 10, 'the access line stays')
  clock.advance(1_000)
  await app.inject('/profile/alice')
  t.match(lines.find((line) => line.msg === 'callers refused at once'), { level: 40 }, 'summed up once a second')
})

t.test('with TRUST_PROXY, an X-Forwarded-For that is no address counts, and is logged, as the connection\'s address', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '3', TRUST_PROXY: 'true' }, logger: { ...logger, level: 'info' } })
  // A new string each time, as long as a header may be: were it a key, each would buy a budget and hold its bytes.
  const junk = (i: number): string => `${'x'.repeat(8_000)}${i}`
  const statuses = []
  for (let i = 0; i < 4; i++) {
    statuses.push((await app.inject({ url: '/profile/alice', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': junk(i) } })).statusCode)
  }
  t.same(statuses, [200, 200, 200, 429], 'one budget: the connection\'s')
  const logged = lines.filter((line) => line.msg === 'request completed').map((line) => line.remoteAddress)
  t.same(logged, ['10.0.0.1', '10.0.0.1', '10.0.0.1', '10.0.0.1'], 'the log line names the connection\'s address, not the header')
})

t.test('with TRUST_PROXY, an address written with a port or a zone is the address; a junk leftmost entry gives way to the one the proxy appended', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '1', TRUST_PROXY: 'true' }, logger: { ...logger, level: 'info' } })
  const ask = async (forwarded: string): Promise<number> =>
    (await app.inject({ url: '/profile/alice', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': forwarded } })).statusCode
  t.equal(await ask('203.0.113.1:50123'), 200)
  t.equal(await ask('203.0.113.2:50124'), 200, 'another client behind a gateway that writes ports has its own budget')
  t.equal(await ask('203.0.113.1:50999'), 429, 'the same client from another port has spent its own')
  t.equal(await ask('[2001:db8:9::1]:443'), 200)
  t.equal(await ask('junk, 198.51.100.7'), 200, 'counted as the address the proxy appended, not the proxy\'s own')
  t.equal(await ask('junk, 198.51.100.7'), 429)
  t.equal(await ask('junk, 6.6.6.6, unknown'), 200, 'past a junk nearest entry, the connection\'s address: none further left')
  t.equal(await ask('junk, 6.6.6.7, unknown'), 429, 'a client cannot buy a budget by writing entries further left')
  t.equal(await ask(`fe80::1%${'z'.repeat(12_000)}`), 200)
  const logged = lines.filter((line) => line.msg === 'request completed').map((line) => line.remoteAddress)
  t.same(logged, ['203.0.113.1', '203.0.113.2', '203.0.113.1', '2001:db8:9::1', '198.51.100.7', '198.51.100.7', '10.0.0.1', '10.0.0.1', 'fe80::1'],
    'logged as addresses, never as written')
})

t.test('an IPv6 client counts by its /64; an IPv4 one written IPv4-mapped counts as itself', async (t) => {
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '1' } })
  const from = async (remoteAddress: string) => (await app.inject({ url: '/profile/alice', remoteAddress })).statusCode
  t.equal(await from('2001:db8:1:2::1'), 200)
  t.equal(await from('2001:DB8:1:2:ffff::9'), 429, 'another address of the same /64 shares its budget')
  t.equal(await from('2001:db8:1:3::1'), 200, 'the next /64 has its own')
  t.equal(await from('203.0.113.7'), 200)
  t.equal(await from('::ffff:203.0.113.7'), 429, 'the same IPv4 client through a dual-stack socket')
})

t.test('RATE_LIMIT_PER_MINUTE=0 turns the limit off', async (t) => {
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '0' } })
  for (let i = 0; i < 30; i++) {
    const res = await app.inject('/profile/alice')
    t.equal(res.statusCode, 200)
    t.equal(res.headers['x-ratelimit-limit'], undefined)
  }
})

t.test('with Redis, instances share one budget per client: each sees the others\' counts once synced (every 100 ms)', async (t) => {
  // Shared counts use windows aligned to the clock: on the real one, a minute's end during the test starts them over.
  const clock = new Clock()
  const { app, config } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '3', REDIS_URL }, now: clock.now })
  const other = await anotherApp(t, config, clock.now)
  const redis = rawRedis(t)
  for (const each of [app, other]) await eventually(() => each.redisLayer?.health.up === true, 'redis up')
  for (const remaining of ['2', '1', '0']) {
    t.equal((await app.inject('/profile/alice')).headers['x-ratelimit-remaining'], remaining)
  }
  // One hash per window, a field per client.
  const counted = async (): Promise<number> => {
    const keys = await redis.keys(`${config.CACHE_KEY_PREFIX}ratelimit:*`)
    const counts = await Promise.all(keys.map(async (key) => await redis.hvals(key)))
    return counts.flat().reduce((sum, value) => sum + Number(value), 0)
  }
  await eventually(async () => await counted() === 3, 'the first instance\'s counts synced')
  // The accepted slack: a client's first request on an instance is counted there, and Redis answers the deployment's
  // count with the next sync, so it is not refused for what the other instances counted.
  const synced = nextSync(other)
  await other.inject('/profile/alice')
  await synced
  t.equal(await counted(), 4, 'the second instance\'s count synced, and the deployment\'s read back')
  const refused = await other.inject('/profile/alice')
  t.equal(refused.statusCode, 429, 'the second instance saw the first one\'s count')
  t.equal(refused.json().code, 'RATE_LIMITED')
  await eventually(async () => await counted() === 5, 'the refused request counted too')
  // Idle for more than a sync, the first instance still knows the client's count: the limit holds on either instance.
  t.equal((await app.inject('/profile/alice')).statusCode, 429, 'the first instance too')
  t.equal((await other.inject('/profile/alice')).statusCode, 429)
  t.equal((await other.inject({ url: '/profile/alice', remoteAddress: '10.0.0.2' })).statusCode, 200, 'another client has its own')
})

for (const skewMs of [-60_000, 60_000]) {
  t.test(`with Redis, two instances whose clocks are ${skewMs / 1000} s apart count into the same minute`, async (t) => {
    const clock = new Clock()
    const skewed = new Clock(clock.now() + skewMs)
    const { app, config } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '3', REDIS_URL }, now: clock.now })
    const other = await anotherApp(t, config, skewed.now)
    for (const each of [app, other]) await eventually(() => each.redisLayer?.health.up === true, 'redis up')
    for (let request = 0; request < 3; request++) t.equal((await app.inject('/profile/alice')).statusCode, 200)
    await nextSync(app)
    const synced = nextSync(other)
    await other.inject('/profile/alice')
    await synced
    t.equal((await other.inject('/profile/alice')).statusCode, 429, 'the other instance saw the first one\'s count')
  })
}

t.test('with Redis unreachable, the instance counts alone: the limit holds per instance, nobody waits on Redis', async (t) => {
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '2', REDIS_URL: `redis://127.0.0.1:${await freePort()}` }, now: new Clock().now })
  const statuses = []
  for (let i = 0; i < 3; i++) statuses.push((await app.inject('/profile/alice')).statusCode)
  t.same(statuses, [200, 200, 429])
})
