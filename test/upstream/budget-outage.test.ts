// A process of its own: it kills a Redis and waits, in real time, for the health state to see it (docs/testing.md).
import { Redis } from 'ioredis'
import t from 'tap'
import { REDIS_OPTIONS } from '../../src/redis/client.ts'
import { Clock, eventually, RedisServer, testLayer } from '../helper.ts'
import { instance, Outcomes, settingsOf, Timers } from './budget/harness.ts'

t.test('Redis killed mid-way: the gates go on with their shares, and no caller hears of it', async (t) => {
  const server = await RedisServer.start(t)
  const redis = new Redis(server.url, REDIS_OPTIONS)
  redis.on('error', () => {})
  t.teardown(() => redis.disconnect())
  const layer = await testLayer(t, redis, 'pbff-test:budget-outage:')
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(50, 2)
  const errors: unknown[] = []
  const shared = { redis, key: 'pbff-test:budget-outage:upstream:budget', health: layer.health, clock: layer.clock }
  const a = instance({ clock, timers, settings, shared, errors })
  const b = instance({ clock, timers, settings, shared, errors })
  const calls = new Outcomes(clock)
  const done = new AbortController()
  calls.ask(a, 'caller', 1_000, done.signal, 'a')
  calls.ask(b, 'caller', 1_000, done.signal, 'b')
  await timers.advance(2_000)
  t.equal(a.rate().scope, 'fleet')
  t.ok(await redis.pttl(shared.key) > 0, 'the bucket has a lifetime in Redis')
  const before = calls.granted.length

  await server.stop()
  await eventually(() => !layer.health.up, 'redis seen down')
  const downAt = clock.now()
  await timers.advance(2_000)
  for (const name of ['a', 'b']) {
    const sent = calls.granted.filter((grant) => grant.tag === name && grant.at >= downAt).length
    t.ok(sent >= 0.9 * 25 * 2 && sent <= 25 * 2 + 25 + 2, `${name}: ${sent} calls in two seconds without Redis`)
  }
  t.ok(before > 0)
  t.ok(calls.peak(1000) <= 50 + settings.burst, `the fleet's busiest second, across the outage: ${calls.peak(1000)} calls`)
  t.equal(a.rate().scope, 'instance')
  t.equal(calls.refused.length, 0, 'no caller refused')
  done.abort()
  await timers.idle()
})
