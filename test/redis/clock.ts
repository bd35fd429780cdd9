import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { cacheStack, eventually, gate, HostClock, NO_DELAY_SHEDDING, REDIS_URL, simulator, testConfig, untilRedisReady } from '../helper.ts'

const ADMIN_TOKEN = 'clock-admin-token'
const authorized = { authorization: `Bearer ${ADMIN_TOKEN}` }

/** Moves this instance's measured offset to Redis by `errorMs`: its times reach Redis `errorMs` later than they are. */
function misjudgeOffset (app: FastifyInstance, errorMs: number): void {
  const clock = app.redisLayer?.clock
  if (clock === undefined) throw new Error('a Redis layer')
  const offsetMs = -clock.toRedis(0)
  // A TIME answer of 0 sets the offset to the (local) time it was asked at.
  clock.sync(['0', '0'], offsetMs - errorMs, offsetMs - errorMs)
}

t.test('two instances whose clocks are 10 minutes apart agree on freshness, Age and purges', async (t) => {
  const sim = await simulator(t)
  const config = testConfig(t, sim, { REDIS_URL, ADMIN_TOKEN })
  const clock = new HostClock(0)
  const aheadClock = new HostClock(600_000)
  const [behind, ahead] = await Promise.all([clock, aheadClock].map(async ({ now }) => {
    const app = await buildApp({ config, now, loadShedding: NO_DELAY_SHEDDING })
    t.teardown(() => app.close())
    return app
  }))
  if (behind === undefined || ahead === undefined) throw new Error('two apps')
  await Promise.all([untilRedisReady(behind, 2), untilRedisReady(ahead, 2)])

  for (const [filler, reader, username] of [[ahead, behind, 'zed'], [behind, ahead, 'yan']] as const) {
    t.equal((await filler.inject(`/profile/${username}`)).headers['x-cache'], 'MISS')
    const read = await reader.inject(`/profile/${username}`)
    t.equal(read.headers['x-cache'], 'HIT')
    const maxAge = Number(/max-age=(\d+)/.exec(String(read.headers['cache-control']))?.[1])
    t.ok(maxAge >= 270 && maxAge <= 300, `${username}: max-age ${maxAge} within the 300 s freshness`)
    t.ok(Number(read.headers.age) <= 1, `${username}: Age ${String(read.headers.age)}`)
  }

  const purge = await ahead.inject({ method: 'POST', url: '/admin/purge/zed', headers: authorized })
  t.same(purge.json(), { username: 'zed', stale: 1 })
  // The revalidation comes a second after the purge: Redis orders the two by each instance's estimate of its offset, which
  // a busy machine's slow TIME round trips blur by tens of ms (a fill within that of the purge may be stored stale again).
  clock.advance(1_000)
  aheadClock.advance(1_000)
  await eventually(async () => (await behind.inject('/profile/zed')).headers['x-cache'] === 'STALE', 'the purge holds on the instance behind')
  await eventually(async () => (await behind.inject('/profile/zed')).headers['x-cache'] === 'HIT', 'revalidated')
  for (let i = 0; i < 20; i++) {
    for (const instance of [ahead, behind]) t.equal((await instance.inject('/profile/zed')).headers['x-cache'], 'HIT')
  }
  t.equal(sim.callsFor('profile', 'zed'), 2, 'one revalidation, no loop')

  clock.advance(300_000)
  aheadClock.advance(300_000)
  t.equal((await behind.inject('/profile/yan')).headers['x-cache'], 'STALE', 'both clocks moved past the freshness')
  await eventually(async () => (await ahead.inject('/profile/yan')).headers['x-cache'] === 'HIT', 'revalidated')
  t.equal(sim.callsFor('profile', 'yan'), 2)
})

for (const [store, env] of [['redis', {}], ['in-process', { REDIS_URL: '' }]] as const) {
  t.test(`${store}: a purge while a load is under way is not undone by that load`, async (t) => {
    const upstream = await gate(t)
    const { app, sim, clock } = await cacheStack(t, { env: { ADMIN_TOKEN, ...env }, gate: upstream })
    // The load is held at the upstream until the purge is done, however long a busy machine takes to make it.
    upstream.hold()
    const loading = app.inject('/profile/race')
    await eventually(() => upstream.held() === 1, 'the load reached the upstream')
    clock.advance(1_000)
    const purge = await app.inject({ method: 'POST', url: '/admin/purge/race', headers: authorized })
    t.equal(purge.statusCode, 200)
    upstream.release()
    const loaded = await loading
    t.equal(loaded.headers['x-cache'], 'MISS')
    // Its caller is told what the store holds: nothing fresh for a browser or a CDN to keep past the purge.
    t.match(loaded.headers['cache-control'], /^public, max-age=0, stale-while-revalidate=0, /)
    t.equal((await app.inject('/profile/race')).headers['x-cache'], 'STALE', 'stored as stale: the next read revalidates')
    await eventually(async () => (await app.inject('/profile/race')).headers['x-cache'] === 'HIT', 'revalidated')
    t.equal(sim.callsFor('profile', 'race'), 2)
  })
}

for (const errorMs of [200, -200]) {
  t.test(`a purge and a load on instances whose offsets disagree by ${errorMs} ms are ordered by Redis, not by the offsets`, async (t) => {
    const upstream = await gate(t)
    const { app: purger, another, sim, clock } = await cacheStack(t, { env: { ADMIN_TOKEN }, gate: upstream })
    const loader = await another()
    misjudgeOffset(purger, errorMs)
    const purge = async (username: string): Promise<void> => {
      t.equal((await purger.inject({ method: 'POST', url: `/admin/purge/${username}`, headers: authorized })).statusCode, 200)
    }

    await purge('after')
    clock.advance(10)
    t.equal((await loader.inject('/profile/after')).headers['x-cache'], 'MISS')
    t.equal((await loader.inject('/profile/after')).headers['x-cache'], 'HIT', 'a load that started after the purge is stored fresh')
    t.equal((await purger.inject('/profile/after')).headers['x-cache'], 'HIT')
    t.equal(sim.callsFor('profile', 'after'), 1)

    upstream.hold()
    const loading = loader.inject('/profile/during')
    await eventually(() => upstream.held() === 1, 'the load reached the upstream')
    clock.advance(10)
    await purge('during')
    upstream.release()
    t.equal((await loading).headers['x-cache'], 'MISS')
    t.equal((await loader.inject('/profile/during')).headers['x-cache'], 'STALE', 'a load under way at the purge is stored stale')
    await eventually(async () => (await loader.inject('/profile/during')).headers['x-cache'] === 'HIT', 'revalidated')
    t.equal((await purger.inject('/profile/during')).headers['x-cache'], 'HIT')
    t.equal(sim.callsFor('profile', 'during'), 2)
  })
}
