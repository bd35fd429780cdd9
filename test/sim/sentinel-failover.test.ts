// Under `npm run test:sim`, not `npm test`: a Sentinel failover takes seconds of real time (issue 35, points 2 and 3).
import t from 'tap'
import { eventually, sentinelGroup, untilRedisReady, type TestContext } from '../helper.ts'
import { askWarm, assertBound, deployment, failoverUnderLoad, WARM } from './failover-load.ts'

const NAME = 'pbff-primary'

/** `count` apps of one deployment on a Sentinel group of the test's own. */
async function sentinelDeployment (t: TestContext, count: number, env: Record<string, string> = {}) {
  const { primary, replica, sentinels } = await sentinelGroup(t, NAME)
  return {
    primary,
    replica,
    ...await deployment(t, count, {
      // The host is the Sentinels' to name; the URL's database (and credentials, TLS) are the primary's.
      REDIS_URL: 'redis://ignored.invalid:6379/0',
      REDIS_SENTINELS: sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(','),
      REDIS_SENTINEL_NAME: NAME,
      ...env
    })
  }
}

t.test('the primary killed: the Sentinels promote its replica, the apps follow them and share the cache again, no warm username fails', async (t) => {
  const { primary, sim, apps: [a, b] } = await sentinelDeployment(t, 2)
  if (a === undefined || b === undefined) throw new Error('two apps')
  for (const username of WARM) t.equal((await a.inject(`/profile/${username}`)).statusCode, 200)

  const killedAt = Date.now()
  await primary.stop()
  // Its connection closes at once; from then on only the promoted replica can bring it up again (the primary is dead).
  await eventually(() => a.redisLayer?.health.up === false, 'a sees the primary gone')
  const { failures, served } = await askWarm([a], () => a.redisLayer?.health.up === true)
  const failoverMs = Date.now() - killedAt
  t.same(failures, [], `${served} answers for warm usernames during the failover (${failoverMs} ms), none failed`)
  t.comment(`failover: Redis shared again ${failoverMs} ms after the primary was killed`)

  // Both apps' subscribers are on the new primary too: what one writes, the other is told of and reads.
  await untilRedisReady(a, 2)
  await untilRedisReady(b, 2)
  t.equal((await a.inject('/profile/after-failover')).statusCode, 200)
  t.equal(sim.callsFor('profile', 'after-failover'), 1)
  t.equal((await b.inject('/profile/after-failover')).statusCode, 200)
  t.equal(sim.callsFor('profile', 'after-failover'), 1, 'b read a\'s entry from the new primary: no second upstream call')
})

t.test('the primary hung (SIGSTOP): the Sentinels promote its replica, and the apps, whose reconnections find it still hung, follow them', async (t) => {
  const { primary, replica, sim, apps: [a, b] } = await sentinelDeployment(t, 2)
  if (a === undefined || b === undefined) throw new Error('two apps')
  for (const username of WARM) t.equal((await a.inject(`/profile/${username}`)).statusCode, 200)

  const hungAt = Date.now()
  primary.pause()
  // Nothing closes: a command or the probe times out and drops the connection, and each reconnection finds the hung
  // primary (its kernel takes the connection) until the Sentinels name another; ioredis's bound on a handshake ends each.
  await eventually(() => a.redisLayer?.health.up === false, 'a sees the primary hung')
  const { failures, served } = await askWarm([a], () => a.redisLayer?.health.up === true)
  const failoverMs = Date.now() - hungAt
  t.same(failures, [], `${served} answers for warm usernames during the failover (${failoverMs} ms), none failed`)
  t.equal(await replica.role(), 'master', 'on the promoted replica')
  t.comment(`failover: Redis shared again ${failoverMs} ms after the primary hung`)

  await untilRedisReady(a, 2)
  await untilRedisReady(b, 2)
  t.comment(`failover: both apps subscribed on the promoted replica ${Date.now() - hungAt} ms after the primary hung`)
  t.equal((await a.inject('/profile/after-hang')).statusCode, 200)
  t.equal((await b.inject('/profile/after-hang')).statusCode, 200)
  t.equal(sim.callsFor('profile', 'after-hang'), 1, 'b read a\'s entry from the new primary: no second upstream call')
})

t.test('a failover under load, three instances, UPSTREAM_MAX_RPS=50: warm usernames all served, the busiest second within rps + 2 bursts, at most one more token exchange', async (t) => {
  const RPS = 50
  const { primary, replica, ...fleet } = await sentinelDeployment(t, 3, { UPSTREAM_MAX_RPS: String(RPS), UPSTREAM_EXPECTED_INSTANCES: '3', UPSTREAM_TIMEOUT_MS: '1000' })
  const { apps } = fleet
  const run = await failoverUnderLoad(fleet, {
    kill: async () => {
      await primary.stop()
      await eventually(() => apps.every((app) => app.redisLayer?.health.up === false), 'the primary seen gone', 5_000)
    },
    promoted: async () => { await eventually(async () => await replica.role() === 'master', 'the replica promoted', 30_000) },
    sharedAgain: async () => { await eventually(() => apps.every((app) => app.redisLayer?.health.up === true), 'the apps on the promoted replica', 30_000) }
  })
  assertBound(t, fleet, run, { rps: RPS, burst: RPS })
})
