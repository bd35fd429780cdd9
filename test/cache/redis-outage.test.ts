import { setImmediate as turn } from 'node:timers/promises'
import t from 'tap'
import { profileOf } from '../../dev/profiles.js'
import { cacheStack, eventually, RedisServer, untilRedisReady } from './helper.js'

const ADMIN_TOKEN = 'outage-admin-token'

t.test('Redis killed under traffic: only 200s (BYPASS, coalesced in-process); after a restart the cache is used again', async (t) => {
  const redis = await RedisServer.start(t)
  const { app, sim } = await cacheStack(t, { env: { REDIS_URL: redis.url, ADMIN_TOKEN }, sim: { latencyMs: 20 } })
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'MISS')
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'HIT')

  const statuses = new Map<number, number>()
  const states = new Set<unknown>()
  let sent = 0
  const stop = new AbortController()
  const traffic = (async () => {
    while (!stop.signal.aborted) {
      const usernames = ['alice', 'bob', `member-${sent % 7}`]
      const batch = await Promise.all(usernames.map(async (username) => await app.inject(`/profile/${username}`)))
      batch.forEach((res, i) => {
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
        states.add(res.headers['x-cache'])
        if (res.statusCode === 200) t.same(res.json(), { user: profileOf(usernames[i] ?? '') })
      })
      sent += batch.length
      // Hits need no I/O (the rate limit counts in-process too): let the timers below run between batches.
      await turn()
    }
  })()
  await eventually(() => sent >= 60, 'traffic before the outage')
  await redis.stop()
  const killedAt = sent
  await eventually(() => sent >= killedAt + 120, 'traffic during the outage')
  stop.abort()
  await traffic
  t.same([...statuses.keys()], [200], 'nothing but 200s')
  t.ok(states.has('BYPASS'), 'answered straight from the upstream while Redis was down')
  t.equal(app.redis?.status === 'ready', false)

  const before = sim.callsFor('profile', 'crowd')
  const crowd = await Promise.all(Array.from({ length: 50 }, async () => await app.inject('/profile/crowd')))
  t.same(new Set(crowd.map((res) => `${res.statusCode} ${String(res.headers['x-cache'])}`)), new Set(['200 BYPASS']))
  t.equal(sim.callsFor('profile', 'crowd') - before, 1, 'still coalesced in this process')

  const purge = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.equal(purge.statusCode, 503)
  t.match(purge.json(), { statusCode: 503, code: 'CACHE_UNAVAILABLE', error: 'Service Unavailable', message: /^The shared cache is unreachable: / })

  await redis.start()
  await untilRedisReady(app)
  const calls = sim.callsFor('profile', 'dora')
  t.equal((await app.inject('/profile/dora')).headers['x-cache'], 'MISS')
  t.equal((await app.inject('/profile/dora')).headers['x-cache'], 'HIT', 'the cache is used again')
  t.equal(sim.callsFor('profile', 'dora') - calls, 1)
})

t.test('Redis unreachable from the start: the service still serves (BYPASS)', async (t) => {
  const redis = await RedisServer.start(t)
  await redis.stop()
  const { app, sim } = await cacheStack(t, { env: { REDIS_URL: redis.url }, waitForRedis: false })
  const answers = await Promise.all([app.inject('/profile/eve'), app.inject('/profile/eve'), app.inject('/user/eve?query=name')])
  t.same(answers.map((res) => res.statusCode), [200, 200, 200])
  t.same(answers.map((res) => res.headers['x-cache']), ['BYPASS', 'BYPASS', 'BYPASS'])
  t.equal(answers[0]?.headers['cache-control'], answers[1]?.headers['cache-control'])
  t.equal(sim.callsFor('profile', 'eve'), 1)
})
