// Under `npm run test:sim`: a purge answered 200 survives a failover, whose replication is asynchronous (issue 35 point 3).
import type { FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import t from 'tap'
import { eventually, sentinelGroup, untilRedisReady, type TestContext } from '../helper.ts'
import { deployment } from './failover-load.ts'

const NAME = 'pbff-primary'
const ADMIN_TOKEN = 'purge-failover-admin-token'

async function purge (app: FastifyInstance, username: string) {
  return await app.inject({ method: 'POST', url: `/admin/purge/${username}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
}

/** Two apps on a Sentinel group of the test's own, `username` held fresh by both. */
async function purgeable (t: TestContext, username: string) {
  const group = await sentinelGroup(t, NAME)
  const fleet = await deployment(t, 2, {
    REDIS_URL: 'redis://ignored.invalid:6379/0',
    REDIS_SENTINELS: group.sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(','),
    REDIS_SENTINEL_NAME: NAME,
    ADMIN_TOKEN
  })
  for (const app of fleet.apps) await app.inject(`/profile/${username}`)
  return { ...group, ...fleet }
}

t.test('a purge answered 200, then the primary killed at once: after the promotion the entry is still stale on every instance', async (t) => {
  const { primary, replica, apps, sim } = await purgeable(t, 'purged')
  t.same(apps.map((app) => sim.callsFor('profile', 'purged')), [1, 1], 'both instances hold the entry, loaded once')
  const purged = await purge(apps[0] as FastifyInstance, 'purged')
  await primary.stop()
  t.equal(purged.statusCode, 200, 'the purge answered 200 (a replica acknowledged it) before the primary was killed')

  await eventually(async () => await replica.role() === 'master', 'the replica promoted', 30_000)
  for (const app of apps) await untilRedisReady(app, apps.length)
  for (const [i, app] of apps.entries()) {
    t.equal((await app.inject('/profile/purged')).headers['x-cache'], 'STALE', `instance ${i}: STALE, not HIT, on the promoted replica`)
  }
})

t.test('a purge no replica acknowledges in time: 503 with Retry-After (applied, but maybe not on the next primary); 200 once the replica answers', async (t) => {
  const { replica, apps: [a, b] } = await purgeable(t, 'unacknowledged')
  if (a === undefined || b === undefined) throw new Error('two apps')
  replica.pause()
  const refused = await purge(a, 'unacknowledged')
  replica.resume()
  t.equal(refused.statusCode, 503)
  t.equal(refused.json().code, 'CACHE_UNAVAILABLE')
  t.ok(Number(refused.headers['retry-after']) > 0, 'with Retry-After')
  t.equal((await b.inject('/profile/unacknowledged')).headers['x-cache'], 'STALE', 'applied on the primary and told to the other instance all the same')
  t.equal((await purge(a, 'unacknowledged')).statusCode, 200, 'the retry, the replica back: 200')
})

t.test('a purge while no replica is online (its link just dropped, and it may still be promoted): 503, not 200', async (t) => {
  const { primary, replica, apps: [a, b] } = await purgeable(t, 'unlinked')
  if (a === undefined || b === undefined) throw new Error('two apps')
  // The link drops (a network blip); the replica, held, cannot reconnect before the purge.
  replica.pause()
  const admin = new Redis(primary.port, '127.0.0.1')
  t.teardown(() => admin.disconnect())
  await admin.call('CLIENT', 'KILL', 'TYPE', 'replica')
  await eventually(async () => !(await admin.info('replication')).includes('state=online'), 'no replica online')
  const refused = await purge(a, 'unlinked')
  replica.resume()
  t.equal(refused.statusCode, 503, 'a failover could still promote the replica that lacks it')
  t.equal(refused.json().code, 'CACHE_UNAVAILABLE')
  t.equal((await b.inject('/profile/unlinked')).headers['x-cache'], 'STALE', 'applied and told all the same')
})
