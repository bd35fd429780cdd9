import { setImmediate as turn } from 'node:timers/promises'
import { Redis } from 'ioredis'
import t from 'tap'
import { profileOf } from '../../dev/profiles.ts'
import { cacheStack, capturedLogger, eventually, gate, metric, parseMetrics, RedisServer, stack, untilRedisReady } from '../helper.ts'

const ADMIN_TOKEN = 'outage-admin-token'
const USERNAMES = ['alice', 'bob', ...Array.from({ length: 7 }, (_, i) => `member-${i}`)]

t.test('Redis killed under traffic: only 200s, the in-process cache shelters the upstream; after a restart, sharing again at one revalidation a key at most', async (t) => {
  const redis = await RedisServer.start(t)
  const { app, sim } = await cacheStack(t, { env: { REDIS_URL: redis.url, ADMIN_TOKEN, RATE_LIMIT_PER_MINUTE: '0' }, sim: { latencyMs: 20 } })
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'MISS')
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'HIT')

  const statuses = new Map<number, number>()
  let sent = 0
  const stop = new AbortController()
  const traffic = (async () => {
    while (!stop.signal.aborted) {
      const usernames = [USERNAMES[sent % USERNAMES.length] ?? '', 'alice']
      const batch = await Promise.all(usernames.map(async (username) => await app.inject(`/profile/${username}`)))
      batch.forEach((res, i) => {
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
        if (res.statusCode === 200) t.same(res.json(), { user: profileOf(usernames[i] ?? '') })
      })
      sent += batch.length
      // Hits need no I/O: let the timers run between batches.
      await turn()
    }
  })()
  await eventually(() => sent >= 60, 'traffic before the outage')
  const callsBefore = USERNAMES.map((username) => sim.callsFor('profile', username))
  await redis.stop()
  await eventually(async () => (await app.inject('/readyz')).json().redis === 'down', '/readyz says down', 3_000)
  const killedAt = sent
  await eventually(() => sent >= killedAt + 400, 'traffic during the outage')
  t.same((await app.inject('/readyz')).json(), { status: 'degraded', redis: 'down', bus: 'down', token: 'held', breaker: 'closed' })
  const outageCalls = USERNAMES.map((username, i) => sim.callsFor('profile', username) - (callsBefore[i] ?? 0))
  t.same(outageCalls, USERNAMES.map(() => 0), 'no upstream call: what this instance held serves for its freshness')

  const purge = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.equal(purge.statusCode, 503, 'a purge cannot reach the other instances')
  t.match(purge.json(), { statusCode: 503, code: 'CACHE_UNAVAILABLE', error: 'Service Unavailable', message: /^The shared cache is unreachable: / })

  await redis.start()
  await untilRedisReady(app)
  const callsBack = USERNAMES.map((username) => sim.callsFor('profile', username))
  const backAt = sent
  await eventually(() => sent >= backAt + 200, 'traffic after the restart')
  stop.abort()
  await traffic
  t.same([...statuses.keys()], [200], 'nothing but 200s')
  // Redis came back empty: a purge made meanwhile may be lost with its data, so what is handed back is stored stale.
  const revalidations = USERNAMES.map((username, i) => sim.callsFor('profile', username) - (callsBack[i] ?? 0))
  t.ok(revalidations.every((calls) => calls <= 1), `Redis back (empty): the entries handed over stale, revalidated once at most: ${revalidations.join(' ')}`)
  const dora = sim.callsFor('profile', 'dora')
  t.equal((await app.inject('/profile/dora')).headers['x-cache'], 'MISS')
  t.equal((await app.inject('/profile/dora')).headers['x-cache'], 'HIT', 'the cache is used again')
  t.equal(sim.callsFor('profile', 'dora') - dora, 1)
})

t.test('Redis unreachable from the start: the service serves from the in-process cache, coalesced', async (t) => {
  const redis = await RedisServer.start(t)
  await redis.stop()
  const { app, sim } = await cacheStack(t, { env: { REDIS_URL: redis.url }, waitForRedis: false })
  const answers = await Promise.all([app.inject('/profile/eve'), app.inject('/profile/eve'), app.inject('/user/eve?query=name')])
  t.same(answers.map((res) => res.statusCode), [200, 200, 200])
  t.same(answers.map((res) => res.headers['x-cache']), ['MISS', 'MISS', 'MISS'])
  t.equal(answers[0]?.headers['cache-control'], answers[1]?.headers['cache-control'])
  const again = await app.inject('/profile/eve')
  t.equal(again.headers['x-cache'], 'HIT', 'kept for its freshness, as without Redis')
  t.match(again.headers['cache-control'], /max-age=(2[7-9]\d|300),/)
  t.equal(sim.callsFor('profile', 'eve'), 1)
  t.same((await app.inject('/readyz')).json().redis, 'down')
})

t.test('"redis events lost" is said when the events stop reaching the instance: not at its start, nor at its close', async (t) => {
  const redis = await RedisServer.start(t)
  const { logger, lines } = capturedLogger()
  const { app } = await stack(t, { env: { REDIS_URL: redis.url }, logger })
  const lost = (): number => lines.filter((line) => String(line.msg).startsWith('redis events lost')).length
  await eventually(async () => (await app.inject('/readyz')).json().bus === 'up', 'the events reaching it')
  t.equal(lost(), 0, 'nothing said at the start')
  await redis.stop()
  await eventually(() => lost() === 1, 'said once Redis is gone')
  await redis.start()
  await eventually(async () => (await app.inject('/readyz')).json().bus === 'up', 'the events reaching it again')
  await app.close()
  t.equal(lost(), 1, 'nothing more said at the close')
})

t.test('Redis refusing this instance (a wrong password) is said once at warn, with Redis\'s reason, never the password', async (t) => {
  const redis = await RedisServer.start(t, ['--requirepass', 'right-password'])
  const { logger, lines, raw } = capturedLogger()
  const wrong = redis.url.replace('redis://', 'redis://:wrong-password@')
  const { app } = await stack(t, { env: { REDIS_URL: wrong }, logger })
  t.equal((await app.inject('/profile/eve')).statusCode, 200, 'served from the in-process cache')
  // Each reconnection fails alike: wait for a few, then count the warnings.
  await eventually(() => lines.filter((line) => line.msg === 'redis connection error').length >= 2, 'reconnections failing')
  const warned = lines.filter((line) => line.level === 40 && /^redis/.test(String(line.msg)))
  t.equal(warned.length, 1, 'one warning, however many reconnections fail')
  t.match(warned[0], { msg: 'redis unreached: serving from the in-process cache', err: { message: /WRONGPASS|NOAUTH/ } })
  t.notMatch(raw.join('\n'), 'wrong-password', 'the password is never logged')
  t.equal((await app.inject('/readyz')).json().redis, 'down')
})

t.test('REDIS_URL naming a database Redis refuses: said at warn, and Redis is not used (nothing lands in database 0); one it has is used', async (t) => {
  const { logger, lines } = capturedLogger()
  // Named by the path or by ioredis's `?db=`.
  const refused = await stack(t, { env: { REDIS_URL: 'redis://127.0.0.1:6379?db=99' }, logger })
  t.equal((await refused.app.inject('/profile/eve')).statusCode, 200, 'served from the in-process cache')
  await eventually(() => lines.some((line) => line.level === 40), 'a warning')
  t.match(lines.find((line) => line.level === 40), { msg: 'redis unreached: serving from the in-process cache', err: { message: /DB index is out of range/ } })
  t.equal((await refused.app.inject('/readyz')).json().redis, 'down')
  const probe = new Redis('redis://127.0.0.1:6379/0')
  const db1 = new Redis('redis://127.0.0.1:6379/1')
  t.teardown(() => { probe.disconnect(); db1.disconnect() })
  t.same(await probe.keys(`${refused.config.CACHE_KEY_PREFIX}*`), [], 'nothing written to database 0')

  const named = await stack(t, { env: { REDIS_URL: 'redis://127.0.0.1:6379/1' } })
  // Its keys go once it has closed (teardowns run last registered first: this one before the app's own close).
  t.teardown(async () => {
    await named.app.close()
    const keys = await db1.keys(`${named.config.CACHE_KEY_PREFIX}*`)
    if (keys.length > 0) await db1.del(...keys)
  })
  await eventually(async () => (await named.app.inject('/readyz')).json().redis === 'up', 'redis up on database 1')
  t.equal((await named.app.inject('/profile/eve')).statusCode, 200)
  await eventually(async () => (await db1.keys(`${named.config.CACHE_KEY_PREFIX}*`)).length > 0, 'its entries in database 1')
})

// Redis may lose a purge's mark while a load that began before the purge runs: restarted empty, or the mark evicted.
for (const purger of ['another instance', 'the loading instance'] as const) {
  for (const loss of ['Redis restarted empty', 'the purge mark evicted'] as const) {
    t.test(`a purge by ${purger} during a load, then ${loss}: the load is stored stale, revalidated once`, async (t) => {
      const redis = await RedisServer.start(t)
      const upstream = await gate(t)
      const { app: loader, another, sim, config } = await cacheStack(t, { env: { REDIS_URL: redis.url, ADMIN_TOKEN }, gate: upstream })
      const other = await another()
      const purging = purger === 'another instance' ? other : loader
      upstream.hold()
      const loading = loader.inject('/profile/race')
      await eventually(() => upstream.held() === 1, 'the load reached the upstream')
      const purge = await purging.inject({ method: 'POST', url: '/admin/purge/race', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      t.equal(purge.statusCode, 200)
      // The case is a purge the loader heard of: one whose event Redis lost too, in the crash, no instance can know.
      const heard = async (): Promise<number> => metric(parseMetrics((await loader.inject('/metrics')).body), 'pbff_purge_propagation_seconds_count') ?? 0
      if (purging === other) await eventually(async () => await heard() >= 1, 'the loader heard the purge')
      if (loss === 'Redis restarted empty') {
        await redis.stop()
        await eventually(() => loader.redisLayer?.health.up === false && other.redisLayer?.health.up === false, 'Redis seen down')
        await redis.start()
        await untilRedisReady(loader, 2)
        await untilRedisReady(other, 2)
      } else {
        const raw = new Redis(redis.url)
        t.equal(await raw.del(`${config.CACHE_KEY_PREFIX}v1:{race}:profile:purge`), 1, 'the mark was there')
        raw.disconnect()
      }
      upstream.release()
      t.equal((await loading).headers['x-cache'], 'MISS')
      t.equal((await loader.inject('/profile/race')).headers['x-cache'], 'STALE', 'the loader: older than the purge')
      t.equal((await other.inject('/profile/race')).headers['x-cache'], 'STALE', 'the other instance too')
      await eventually(async () => (await loader.inject('/profile/race')).headers['x-cache'] === 'HIT', 'revalidated')
      t.equal((await other.inject('/profile/race')).headers['x-cache'], 'HIT')
      t.equal(sim.callsFor('profile', 'race'), 2, 'one revalidation')
    })
  }
}
