import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import t from 'tap'
import type { Simulator } from '../../../dev/simulator.ts'
import { cacheStack, eventually, gate, oneRedisClock, rawRedis, RedisServer, type Clock } from '../../helper.ts'

// The contract's "one upstream call per username per freshness window per deployment, revalidation included" while the
// upstream keeps failing: a failed revalidation holds the key's next ones for a freshness on every instance (before,
// every stale read after a failure started another: about one call a second per instance, past the breaker's five).
// Swept over freshness settings and deployments, on a moved clock; each step's background loads end before the next.

const FRESHNESS_S = [1, 10, 300]
const DEPLOYMENTS = [
  { name: 'one instance, in-process store', instances: 1, redis: false },
  { name: 'one instance on Redis', instances: 1, redis: true },
  { name: 'two instances on one Redis', instances: 2, redis: true },
  { name: 'three instances on one Redis', instances: 3, redis: true }
]
/** Freshness windows the upstream fails for, callers arriving at every tenth of one. */
const FAILING_WINDOWS = 3
const STEPS_PER_WINDOW = 10
/** Requests per instance and step, at once. */
const CALLERS = 2
const ADMIN_TOKEN = 'admin-secret-token-for-tests'

interface Fleet {
  apps: FastifyInstance[]
  sim: Simulator
  clock: Clock
}

/** Every instance asked for `username` by CALLERS callers at once; answered once the background loads they started ended. */
async function ask (fleet: Fleet, username: string): Promise<LightMyRequestResponse[]> {
  const answers = await Promise.all(fleet.apps.flatMap((app) => Array.from({ length: CALLERS }, async () => await app.inject(`/profile/${username}`))))
  await Promise.all(fleet.apps.map(async (app) => { await app.cacheLoads.settled(10_000) }))
  return answers
}

/** The answers' status and X-Cache, each counted once. */
function kinds (answers: LightMyRequestResponse[]): string[] {
  return [...new Set(answers.map((res) => `${res.statusCode} ${String(res.headers['x-cache'])}`))]
}

/** Calls closer to the one before than a freshness: the bound broken. */
function closer (calls: number[], freshMs: number): number[] {
  return calls.filter((at, index) => index > 0 && at - (calls[index - 1] as number) < freshMs)
}

for (const { name, instances, redis } of DEPLOYMENTS) {
  for (const freshnessS of FRESHNESS_S) {
    t.test(`${name}, fresh ${freshnessS} s: a failing upstream sees one revalidation per freshness, callers get 200 STALE; a purge loads once; recovery within a freshness`, async (t) => {
      const freshMs = freshnessS * 1000
      const stepMs = freshMs / STEPS_PER_WINDOW
      const env = { PROFILE_TTL_SECONDS: String(freshnessS), RATE_LIMIT_PER_MINUTE: '0', ADMIN_TOKEN, ...(!redis && { REDIS_URL: '' }) }
      const { app, sim, clock, another } = await cacheStack(t, { env })
      const fleet: Fleet = { apps: [app], sim, clock }
      for (let i = 1; i < instances; i++) fleet.apps.push(await another())
      oneRedisClock(fleet.apps, fleet.clock.now())
      const last = fleet.apps[instances - 1] as FastifyInstance
      const username = `failing-${freshnessS}`
      const calls = (): number => sim.callsFor('profile', username)

      t.equal((await app.inject(`/profile/${username}`)).headers['x-cache'], 'MISS')
      clock.advance(freshMs)
      sim.failAlways({ kind: 'status', status: 502 })
      const start = clock.now()
      const callTimes: number[] = []
      const answerKinds = new Set<string>()
      for (let step = 0; step < FAILING_WINDOWS * STEPS_PER_WINDOW; step++) {
        if (step > 0) clock.advance(stepMs)
        const before = calls()
        for (const kind of kinds(await ask(fleet, username))) answerKinds.add(kind)
        for (let call = before; call < calls(); call++) callTimes.push(clock.now() - start)
        if (step === STEPS_PER_WINDOW / 2) {
          // Another username's cold miss during the hold: loaded for its caller (and failing as the upstream does).
          const cold = await last.inject(`/profile/cold-${freshnessS}`)
          t.equal(cold.json<{ code: string }>().code, 'UPSTREAM_ERROR', 'a cold miss of another username gets its own load')
          t.equal(sim.callsFor('profile', `cold-${freshnessS}`), 1, 'one call for the cold miss, not held back')
        }
      }
      t.same([...answerKinds], ['200 STALE'], 'every caller got the stale entry at once')
      t.same(closer(callTimes, freshMs), [], `no revalidation within a freshness of the one before (calls at ${callTimes.join(', ')} ms)`)
      t.ok(callTimes.length >= 1 && callTimes.length <= FAILING_WINDOWS, `${callTimes.length} calls in ${FAILING_WINDOWS} windows, at most one each`)

      // A purge while the last failure's hold lasts: one new load, then held again (it failed too).
      clock.advance(stepMs / 2)
      const purge = await last.inject({ method: 'POST', url: `/admin/purge/${username}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      t.equal(purge.statusCode, 200)
      const beforePurgeLoad = calls()
      t.same(kinds(await ask(fleet, username)), ['200 STALE'])
      t.equal(calls() - beforePurgeLoad, 1, 'the purge led to one new load')
      const purgeLoadAt = clock.now()
      clock.advance(stepMs / 5)
      t.same(kinds(await ask(fleet, username)), ['200 STALE'])
      t.equal(calls() - beforePurgeLoad, 1, 'and its failure holds the next revalidation')

      // The upstream recovers: revalidated within a freshness of its last failure, then a hit on every instance.
      sim.failAlways(undefined)
      const recoveredAt = clock.now()
      const beforeRecovery = calls()
      while (calls() === beforeRecovery && clock.now() - recoveredAt < 2 * freshMs) {
        clock.advance(stepMs)
        await ask(fleet, username)
      }
      t.equal(calls() - beforeRecovery, 1, 'one revalidation after the recovery')
      t.ok(clock.now() - recoveredAt <= freshMs, `revalidated ${clock.now() - recoveredAt} ms after the recovery, ${clock.now() - purgeLoadAt} after the last failure (freshness ${freshMs})`)
      t.same(kinds(await ask(fleet, username)), ['200 HIT'], 'then served fresh everywhere')
      t.equal(calls() - beforeRecovery, 1)
    })
  }
}

for (const redis of [false, true]) {
  t.test(`${redis ? 'on Redis' : 'in-process'}: a failed refresh-ahead holds nothing: the entry's first stale read revalidates`, async (t) => {
    const freshMs = 10_000
    const { app, sim, clock } = await cacheStack(t, { env: { PROFILE_TTL_SECONDS: '10', RATE_LIMIT_PER_MINUTE: '0', ...(!redis && { REDIS_URL: '' }) } })
    const calls = (): number => sim.callsFor('profile', 'hot')
    t.equal((await app.inject('/profile/hot')).headers['x-cache'], 'MISS')
    // Nine tenths in, still fresh whatever the jitter: the fifth hit refreshes ahead, and the upstream fails it.
    clock.advance(freshMs * 0.9)
    sim.failAlways({ kind: 'status', status: 502 })
    for (let hit = 0; hit < 5; hit++) t.equal((await app.inject('/profile/hot')).headers['x-cache'], 'HIT')
    await app.cacheLoads.settled(10_000)
    t.equal(calls(), 2, 'the refresh-ahead was sent')
    sim.failAlways(undefined)
    clock.advance(freshMs / 10 + 1)
    t.equal((await app.inject('/profile/hot')).headers['x-cache'], 'STALE')
    await app.cacheLoads.settled(10_000)
    t.equal(calls(), 3, 'the first stale read revalidated')
    t.equal((await app.inject('/profile/hot')).headers['x-cache'], 'HIT')
  })

  t.test(`${redis ? 'on Redis' : 'in-process'}: a revalidation this instance refused itself (its queue full) holds nothing`, async (t) => {
    const upstream = await gate(t)
    const env = { PROFILE_TTL_SECONDS: '10', UPSTREAM_MAX_CONCURRENCY: '1', RATE_LIMIT_PER_MINUTE: '0', ...(!redis && { REDIS_URL: '' }) }
    const { app, sim, clock } = await cacheStack(t, { env, gate: upstream })
    t.equal((await app.inject('/profile/kept')).headers['x-cache'], 'MISS')
    clock.advance(10_001)
    // One call at the upstream and eight queued for the only slot: the queue is full.
    upstream.hold()
    const crowd = Array.from({ length: 9 }, async (_, i) => await app.inject(`/profile/crowd-${i}`))
    await eventually(() => upstream.held() === 1, 'the crowd\'s first call at the upstream')
    t.equal((await app.inject('/profile/kept')).headers['x-cache'], 'STALE', 'its revalidation refused: UPSTREAM_OVERLOADED')
    await app.cacheLoads.settled(0)
    upstream.release()
    await Promise.all(crowd)
    await app.cacheLoads.settled(10_000)
    t.equal(sim.callsFor('profile', 'kept'), 1, 'nothing sent for it')
    t.equal((await app.inject('/profile/kept')).headers['x-cache'], 'STALE')
    await app.cacheLoads.settled(10_000)
    t.equal(sim.callsFor('profile', 'kept'), 2, 'the next stale read revalidated: the refusal held nothing')
    t.equal((await app.inject('/profile/kept')).headers['x-cache'], 'HIT')
  })
}

t.test('a purge whose event an instance missed frees its hold once its bus is back: Redis, which the purge freed, decides', async (t) => {
  const redis = await RedisServer.start(t)
  const { app: a, another, sim, clock } = await cacheStack(t, { env: { REDIS_URL: redis.url, ADMIN_TOKEN, PROFILE_TTL_SECONDS: '10' } })
  const b = await another()
  oneRedisClock([a, b], clock.now())
  const calls = (): number => sim.callsFor('profile', 'missed')
  t.equal((await a.inject('/profile/missed')).headers['x-cache'], 'MISS')
  clock.advance(10_001)
  sim.failAlways({ kind: 'status', status: 502 })
  t.equal((await b.inject('/profile/missed')).headers['x-cache'], 'STALE')
  await b.cacheLoads.settled(10_000)
  t.equal(calls(), 2, 'B\'s revalidation failed: the key is held')
  sim.failAlways(undefined)
  // The subscribers reconnect 200 ms later at the soonest: the purge's event, a few ms away, reaches nobody.
  await rawRedis(t, redis.url).call('CLIENT', 'KILL', 'TYPE', 'pubsub')
  const purge = await a.inject({ method: 'POST', url: '/admin/purge/missed', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.equal(purge.statusCode, 200)
  await eventually(() => b.redisLayer?.bus.ready === true, 'B\'s bus back')
  t.equal((await b.inject('/profile/missed')).headers['x-cache'], 'STALE')
  await b.cacheLoads.settled(10_000)
  t.equal(calls(), 3, 'the purge led to one load on B')
  t.equal((await b.inject('/profile/missed')).headers['x-cache'], 'HIT')
})
