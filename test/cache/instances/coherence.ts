import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { cacheStack, eventually, metric, oneRedisClock, parseMetrics, rawRedis, RedisServer } from '../../helper.ts'

const ADMIN_TOKEN = 'coherence-admin-token'
const authorized = { authorization: `Bearer ${ADMIN_TOKEN}` }

async function purge (app: FastifyInstance, username: string): Promise<void> {
  const res = await app.inject({ method: 'POST', url: `/admin/purge/${username}`, headers: authorized })
  if (res.statusCode >= 300) throw new Error(`purge answered ${res.statusCode}`)
}

async function purgesApplied (app: FastifyInstance): Promise<number> {
  return metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_purge_propagation_seconds_count') ?? 0
}

async function xCache (app: FastifyInstance, username: string): Promise<unknown> {
  return (await app.inject(`/profile/${username}`)).headers['x-cache']
}

t.test('a purge on one instance: the other answers STALE, not HIT, once its event is applied, and times its propagation', async (t) => {
  const { app: a, another } = await cacheStack(t, { env: { ADMIN_TOKEN } })
  const b = await another()
  t.equal(await xCache(a, 'alice'), 'MISS')
  t.equal(await xCache(b, 'alice'), 'HIT', 'B holds a copy')
  t.equal(await purgesApplied(b), 0)
  await purge(a, 'alice')
  // One event per key the username has (profile, timeline).
  await eventually(async () => await purgesApplied(b) === 2, 'the purge heard and timed by B')
  t.equal(await xCache(b, 'alice'), 'STALE', 'B\'s copy dropped the moment the event was applied')
  t.equal(await purgesApplied(a), 0, 'an instance does not time its own purges')
})

t.test('a purge whose event is lost: the other instance answers STALE within the copies\' 2 s bound', async (t) => {
  const redis = await RedisServer.start(t)
  const { app: a, another, clock } = await cacheStack(t, { env: { REDIS_URL: redis.url, ADMIN_TOKEN } })
  const b = await another()
  t.equal(await xCache(a, 'alice'), 'MISS')
  // A's fill event reaches B with A's answer (published by its store script): a read of B's it overtakes keeps no copy.
  await xCache(b, 'alice')
  t.equal(await xCache(b, 'alice'), 'HIT', 'B holds a copy')
  // The subscribers reconnect 200 ms later at the soonest: the purge's event, a few ms away, reaches nobody.
  await rawRedis(t, redis.url).call('CLIENT', 'KILL', 'TYPE', 'pubsub')
  await purge(a, 'alice')
  t.equal(await xCache(b, 'alice'), 'HIT', 'the event lost: B\'s copy still answers')
  clock.advance(1_999)
  t.equal(await xCache(b, 'alice'), 'HIT', 'within the bound')
  clock.advance(1)
  t.equal(await xCache(b, 'alice'), 'STALE', 'at the copies\' 2 s bound, Redis is read: STALE')
  t.equal(await purgesApplied(b), 0, 'no event was heard')
})

t.test('a purged entry stamped by an instance whose estimate of Redis\'s clock runs ahead is replaced by the next revalidation, not revalidated at every read', async (t) => {
  const { app: behind, another, sim, clock } = await cacheStack(t, { env: { ADMIN_TOKEN, PROFILE_TTL_SECONDS: '10' } })
  const ahead = await another()
  // 500 ms ahead of the first's estimate: what a re-measure after a Redis pause can leave (test/sim's seed 50).
  oneRedisClock([behind, ahead], clock.now(), 500)
  t.equal(await xCache(ahead, 'skewed'), 'MISS')
  await purge(ahead, 'skewed')
  for (let read = 0; read < 5; read++) {
    await xCache(behind, 'skewed')
    await behind.cacheLoads.settled(10_000)
  }
  t.equal(sim.callsFor('profile', 'skewed'), 2, 'one revalidation after the purge, its fill stored')
  t.equal(await xCache(behind, 'skewed'), 'HIT')
})
