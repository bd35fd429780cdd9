import t from 'tap'
import { RedisClock } from '../../../src/redis/clock.ts'
import { Membership, MEMBER_LIFETIME_MS } from '../../../src/redis/membership.ts'
import type { Schedule } from '../../../src/upstream/budget/schedule.ts'
import { cacheStack, Clock, eventually, fakeHealth, metric, parseMetrics, REDIS_URL, testRedis, type TestContext } from '../../helper.ts'
import { instance, Outcomes, settingsOf, Timers } from './harness.ts'

// Issue 35: the fleet's live count in Redis, each instance's share of the budget by it, and the outage's share by
// the larger of the largest recent count and UPSTREAM_EXPECTED_INSTANCES (restart-empty.ts: why recent, not last).

/** A health state the test sets, with the listeners Membership registers (never called: the test moves `up`). */
function health (): ReturnType<typeof fakeHealth> & { listen: () => void } {
  return Object.assign(fakeHealth(), { listen: () => {} })
}

/** Instances of one deployment on the shared Redis, under a prefix of the test's own. */
function fleet (t: TestContext, clock: Clock, timers: Timers, shared: ReturnType<typeof health>) {
  const { redis, prefix } = testRedis(t)
  const key = `${prefix}members`
  const join = (schedule: Schedule = timers.schedule): Membership => {
    const member = new Membership({ redis, health: shared, clock: new RedisClock(clock.now), key, now: clock.now, schedule, onError: () => {} })
    member.start()
    return member
  }
  return { join, key, redis, prefix }
}

const seen = async (members: Membership[], count: number): Promise<void> => {
  await eventually(() => members.every((member) => member.lastSeen === count), `every instance sees ${count}`)
}

t.test('the live count follows instances joining, leaving, and going silent for a lifetime', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const { join, key, redis } = fleet(t, clock, timers, health())
  const a = join()
  let bBeats = true
  const b = join((ms, run) => timers.schedule(ms, () => { if (bBeats) run() }))
  await timers.advance(1_000)
  await seen([a, b], 2)
  t.ok(await redis.pttl(key) > 0, 'the members key has a lifetime: a fleet gone leaves nothing behind')

  const c = join()
  await timers.advance(1_000)
  await seen([a, b, c], 3)

  await c.close()
  t.equal(await redis.zcard(key), 2, 'an instance closing leaves the count at once')
  await timers.advance(1_000)
  await seen([a, b], 2)

  // b stops beating without leaving (a crash): it counts until a lifetime after its last beat, then no more.
  bBeats = false
  await timers.advance(MEMBER_LIFETIME_MS - 1_000)
  t.equal(await redis.zcard(key), 2, 'still counted within its lifetime')
  await timers.advance(1_000)
  await seen([a], 1)
  await a.close()
  await b.close()
})

t.test('the share follows the live count; while Redis is down, the larger of the largest recent count and the expected', async (t) => {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const timers = new Timers(clock)
  const up = fakeHealth()
  const members: { lastSeen: number | undefined, recentMost: number | undefined } = { lastSeen: undefined, recentMost: undefined }
  const shared = { redis, key: `${prefix}upstream:budget`, health: up }
  const gate = instance({ clock, timers, settings: settingsOf(60, 2), shared, members })
  t.match(gate.rate(), { scope: 'fleet', rps: 60, shareRps: 30, instances: 2 }, 'before any count: the expected')
  members.lastSeen = 4
  t.match(gate.rate(), { scope: 'fleet', rps: 60, shareRps: 15, instances: 4 }, 'the live count')
  members.lastSeen = 1
  t.match(gate.rate(), { scope: 'fleet', shareRps: 60, instances: 1 }, 'alone: the whole budget is its share')

  members.lastSeen = 4
  members.recentMost = 4
  up.up = false
  const calls = new Outcomes(clock)
  const done = new AbortController()
  calls.ask(gate, 'caller', 100, done.signal)
  await timers.advance(2_000)
  t.match(gate.rate(), { scope: 'instance', rps: 15, instances: 4 }, 'down: the largest recent count, above the expected')
  t.ok(calls.granted.length <= 15 * 2 + 60 / 4, `${calls.granted.length} calls in 2 s at 15 calls/s and a quarter of the burst`)
  members.recentMost = 1
  t.match(gate.rate(), { scope: 'instance', rps: 30, instances: 2 }, 'down: the expected, above the largest recent count')

  const started = instance({ clock, timers, settings: settingsOf(60, 3), shared, members: { lastSeen: undefined, recentMost: undefined } })
  t.match(started.rate(), { scope: 'instance', rps: 20, instances: 3 }, 'started during the outage: the expected')
  done.abort()
  await timers.idle()
})

t.test('three instances grow to six while Redis is down (UPSTREAM_EXPECTED_INSTANCES=6): the upstream sees at most rps + burst in any second', async (t) => {
  const RPS = 60
  const clock = new Clock()
  const timers = new Timers(clock)
  const up = health()
  const { join, redis, prefix } = fleet(t, clock, timers, up)
  const settings = settingsOf(RPS, 6)
  const shared = { redis, key: `${prefix}upstream:budget`, health: up }
  const calls = new Outcomes(clock)
  const done = new AbortController()
  const gates = [join(), join(), join()].map((members) => instance({ clock, timers, settings, shared, members }))
  await timers.advance(1_000)
  for (const gate of gates) calls.ask(gate, 'caller', 400, done.signal)
  await timers.advance(3_000)
  t.same(gates.map((gate) => gate.rate().instances), [3, 3, 3], 'the live count while Redis is up')

  up.up = false
  const downAt = clock.now()
  for (let i = 0; i < 3; i++) {
    const gate = instance({ clock, timers, settings, shared, members: join() })
    gates.push(gate)
    calls.ask(gate, 'caller', 400, done.signal)
    await timers.advance(500)
  }
  await timers.advance(4_500)
  t.same(gates.map((gate) => gate.rate().instances), [6, 6, 6, 6, 6, 6], 'down: the expected, above the last count seen')
  const peak = calls.peak(1_000)
  t.ok(peak <= RPS + settings.burst, `the busiest second: ${peak} calls <= ${RPS + settings.burst}`)
  const steady = calls.granted.filter((grant) => grant.at >= downAt + 3_000).length
  t.ok(steady <= RPS * 3 + settings.burst, `the last 3 s of the outage, six instances: ${steady} calls <= ${RPS * 3 + settings.burst}`)
  t.ok(steady >= RPS * 3 * 0.9, `and the budget is used: ${steady} calls`)
  done.abort()
  await timers.idle()
})

t.test('/readyz and the metrics show the instances the budget is shared by, live', async (t) => {
  const { app, another } = await cacheStack(t, { env: { REDIS_URL, UPSTREAM_MAX_RPS: '50', UPSTREAM_EXPECTED_INSTANCES: '5' } })
  const readyz = async (): Promise<number> => (await app.inject('/readyz')).json<{ fleetInstances: number }>().fleetInstances
  await eventually(async () => await readyz() === 1, 'one instance, live')
  const second = await another()
  await eventually(async () => await readyz() === 2, 'a second one joins')
  t.equal(metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_upstream_budget_fleet_instances'), 2)
  await second.close()
  await eventually(async () => await readyz() === 1, 'it left')
})
