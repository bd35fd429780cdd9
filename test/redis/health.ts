import { EventEmitter } from 'node:events'
import { mock } from 'node:test'
import t from 'tap'
import { ReplyError } from 'ioredis'
import { RedisClock } from '../../src/redis/clock.ts'
import { RedisHealth } from '../../src/redis/health.ts'
import { eventually, settle } from '../helper.ts'

/** A client the test drives: its status, what PING and TIME answer, and how often it was dropped. */
class FakeClient extends EventEmitter {
  status = 'ready'
  answering = true
  redisTimeMs = 1_000_000
  pings = 0
  disconnects = 0
  ping = async (): Promise<'PONG'> => {
    this.pings++
    return this.answering ? 'PONG' : await new Promise<never>(() => {})
  }

  time = async (): Promise<number[]> => {
    if (!this.answering) return await new Promise<never>(() => {})
    return [Math.floor(this.redisTimeMs / 1000), (this.redisTimeMs % 1000) * 1000]
  }

  disconnect = (): void => { this.disconnects++ }
}

function healthOf (t: { teardown: (fn: () => void) => void }, client: FakeClient, localNow = 5_000_000) {
  const changes: boolean[] = []
  const clock = new RedisClock(() => localNow)
  const health = new RedisHealth({ client, clock, downProbeMs: 10, upProbeMs: 20, commandTimeoutMs: 50, onChange: (up) => changes.push(up) })
  t.teardown(() => health.close())
  return { health, changes, clock }
}

/**
 * A client whose TIME answers are read `late()` ms after they were asked for (a process busy starting, a far Redis),
 * Redis reading its clock `readsAfterMs` into that wait, and the clock they set; `step` moves the host's clock.
 */
function answeredLate (late: () => number, readsAfterMs = 0) {
  const client = new FakeClient()
  let local = 5_000_000
  let asked = 0
  client.time = async () => {
    asked++
    const redisMs = client.redisTimeMs + readsAfterMs
    const waitedMs = late()
    local += waitedMs
    client.redisTimeMs += waitedMs
    return [Math.floor(redisMs / 1000), (redisMs % 1000) * 1000]
  }
  return { client, clock: new RedisClock(() => local), asked: () => asked, local: () => local, step: (ms: number) => { local += ms } }
}

t.test('the probe brings Redis up and sets the clock; a timed-out command marks it down at once and drops the connection', async (t) => {
  const client = new FakeClient()
  const { health, changes, clock } = healthOf(t, client)
  t.equal(health.up, false, 'down until the probe has an answer')
  await eventually(() => health.up, 'probed up')
  t.equal(clock.toRedis(5_000_000), 1_000_000, 'the offset to Redis measured when it came up')
  t.equal(clock.toLocal(1_000_300), 5_000_300)

  let sent = 0
  const hung = async (): Promise<string> => { sent++; return await new Promise<never>(() => {}) }
  await t.rejects(health.run(hung), { code: 'CACHE_UNAVAILABLE', message: /a redis command failed/ })
  t.equal(health.up, false)
  t.equal(client.disconnects, 1, 'the hung connection is dropped')
  await t.rejects(health.run(hung), { code: 'CACHE_UNAVAILABLE', message: /redis is down/ })
  t.equal(sent, 1, 'nothing is sent while down')
  t.same(changes, [true, false])
})

t.test('the first command to time out lets go at once of every caller still waiting on the hung connection', async (t) => {
  const client = new FakeClient()
  const { health } = healthOf(t, client)
  await eventually(() => health.up, 'probed up')
  const hung = async (): Promise<string> => await new Promise<never>(() => {})
  const first = health.run(hung)
  // Sent half a bound later: its own bound would end half a bound after the first's.
  const { later } = await new Promise<{ later: Promise<string> }>((resolve) => setTimeout(() => { resolve({ later: health.run(hung) }) }, 25))
  let laterSettled = false
  later.catch(() => {}).finally(() => { laterSettled = true })
  await t.rejects(first, { code: 'CACHE_UNAVAILABLE' })
  await settle()
  t.ok(laterSettled, 'let go with the first')
  await t.rejects(later, { code: 'CACHE_UNAVAILABLE', cause: { message: 'Redis went down meanwhile' } })
})

t.test('a reply error is Redis answering: it stays up', async (t) => {
  const client = new FakeClient()
  const { health } = healthOf(t, client)
  await eventually(() => health.up, 'probed up')
  const replyError = Object.assign(new Error('WRONGTYPE'), { name: 'ReplyError' })
  Object.defineProperty(replyError, 'name', { value: 'ReplyError' })
  await t.rejects(health.run(async () => await Promise.reject(replyError)), { code: 'CACHE_UNAVAILABLE' })
  t.equal(health.up, true)
  t.equal(await health.run(async () => 'OK'), 'OK')
})

t.test('a hang with no traffic is seen by the probe, and only the probe brings Redis back', async (t) => {
  const client = new FakeClient()
  const { health, changes } = healthOf(t, client)
  await eventually(() => health.up, 'probed up')
  client.answering = false
  await eventually(() => !health.up, 'the probe\'s PING timed out', 2_000)
  client.answering = true
  await eventually(() => health.up, 'probed up again', 2_000)
  client.status = 'reconnecting'
  client.emit('close')
  t.equal(health.up, false, 'a lost connection is down at once')
  t.same(changes, [true, false, true, false])
})

t.test('each probe\'s TIME narrows the clock\'s error while Redis is up; a step of the host\'s clock waits for the next reconnection', async (t) => {
  // Redis reads its clock at once, and its answer takes `slowMs` to be read here (a process busy starting).
  let slowMs = 400
  const { client, clock, asked, local, step } = answeredLate(() => slowMs)
  const health = new RedisHealth({ client, clock, downProbeMs: 10, upProbeMs: 20, commandTimeoutMs: 50 })
  t.teardown(() => health.close())
  await eventually(() => health.up, 'probed up')
  t.equal(clock.errorMs, 201, 'half the first round trip, and a millisecond of rounding')
  t.equal(clock.toRedis(local()) - client.redisTimeMs, -200, 'its offset: 200 ms off')
  slowMs = 0
  await eventually(() => clock.errorMs === 1, 'a quick TIME narrows it')
  t.equal(clock.toRedis(local()), client.redisTimeMs, 'on Redis\'s clock now')
  step(60_000)
  const before = asked()
  await eventually(() => asked() > before + 1, 'probed since the step')
  t.equal(clock.toRedis(local()) - client.redisTimeMs, 60_000, 'the step is not taken while up (it is at the next reconnection)')
})

t.test('a first TIME read late (a process busy starting) is narrowed at the next tick, not after the up cadence; then the cadence is back', async (t) => {
  // Node's mock timers, for this test only: the probe's interval moves without waiting.
  mock.timers.enable({ apis: ['setInterval'] })
  t.teardown(() => { mock.timers.reset() })
  // Late by 6 ms the error is within what the probe settles for; by more, it is not.
  for (const lateMs of [6, 20, 150, 400]) {
    let late = lateMs
    const { client, clock, asked } = answeredLate(() => late)
    // The production cadence: a tick every 250 ms, a probe every fourth while up.
    const health = new RedisHealth({ client, clock, downProbeMs: 250, upProbeMs: 1_000, commandTimeoutMs: 50 })
    const tick = async (): Promise<void> => {
      mock.timers.tick(250)
      await settle()
    }
    await tick()
    t.ok(health.up, `${lateMs} ms late: up`)
    t.equal(clock.errorMs, lateMs / 2 + 1, `${lateMs} ms late: half the round trip`)
    late = 0
    await tick()
    t.equal(clock.errorMs, lateMs > 8 ? 1 : lateMs / 2 + 1, `${lateMs} ms late: ${lateMs > 8 ? 'narrowed at the next tick' : 'left to the up cadence'}`)
    const settled = asked()
    for (let ticks = 0; ticks < 3; ticks++) await tick()
    t.ok(asked() - settled <= 1, `${lateMs} ms late: then one TIME a second at most (${asked() - settled} in three ticks)`)
    health.close()
  }
  // A round trip of 20 ms (another zone) never narrows the error below 5 ms: eight probes, then the up cadence.
  const far = answeredLate(() => 20, 10)
  const health = new RedisHealth({ client: far.client, clock: far.clock, downProbeMs: 250, upProbeMs: 1_000, commandTimeoutMs: 50 })
  for (let ticks = 0; ticks < 41; ticks++) {
    mock.timers.tick(250)
    await settle()
  }
  t.ok(far.clock.errorMs > 5, `a 20 ms round trip: the error stays ${far.clock.errorMs} ms`)
  t.ok(far.asked() <= 1 + 8 + 10, `a 20 ms round trip: ${far.asked()} TIMEs in ten seconds, not 40`)
  health.close()
})

t.test('coming up, the database REDIS_URL names is selected again: a Redis refusing it (out of range, an ACL) stays down', async (t) => {
  const cases = [
    ['OK', true],
    [new ReplyError('ERR DB index is out of range'), false],
    [new ReplyError('NOPERM this user has no permissions to run the \'select\' command'), false]
  ] as const
  for (const [answer, up] of cases) {
    let asked = 0
    const client = Object.assign(new FakeClient(), { select: async () => { asked++; if (answer instanceof Error) throw answer; return answer } })
    const health = new RedisHealth({ client, clock: new RedisClock(() => 5_000_000), downProbeMs: 10, upProbeMs: 20, commandTimeoutMs: 50, database: 3 })
    t.teardown(() => health.close())
    // Asked at each probe while not up: three probes say it stays so.
    await eventually(() => health.up || asked >= 3, 'up, or probed three times')
    t.equal(health.up, up, `${String(answer).slice(0, 40)}: ${up ? 'up' : 'not up'}`)
  }
})
