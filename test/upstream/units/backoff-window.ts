import t from 'tap'
import { BackoffWindow } from '../../../src/upstream/backoff-window.ts'
import { SharedWindow } from '../../../src/redis/shared-window.ts'
import { Clock, deadRedis, fakeHealth, recordingTelemetry, testRedis } from '../../helper.ts'

t.test('a window opens, counts down and closes, reported once each way', async (t) => {
  const clock = new Clock()
  const telemetry = recordingTelemetry()
  const window = new BackoffWindow({ telemetry, now: clock.now })
  t.equal(await window.check(), 0)
  await window.open(7_000)
  t.equal(window.remainingMs, 7_000)
  clock.advance(2_000)
  t.equal(await window.check(), 5_000)
  await window.open(1_000)
  t.equal(window.remainingMs, 5_000, 'a shorter Retry-After does not shorten the window')
  clock.advance(5_000)
  t.equal(await window.check(), 0)
  t.same(telemetry.events, ['backoff:true', 'backoff:false'])
})

t.test('with Redis, one instance\'s window holds for every instance', async (t) => {
  const { redis, prefix } = testRedis(t)
  const key = `${prefix}upstream:backoff`
  const windowOf = () => new BackoffWindow({ shared: new SharedWindow({ redis, health: fakeHealth(), key, onError: () => {} }), telemetry: recordingTelemetry() })
  const a = windowOf()
  const b = windowOf()
  await a.open(30_000)
  t.equal(b.remainingMs, 0, 'b has not asked yet')
  const seen = await b.check()
  t.ok(seen > 29_000 && seen <= 30_000, `b sees the window (${seen} ms)`)
  t.ok(b.remainingMs > 29_000, 'and remembers it')
  await b.open(1_000)
  t.ok(await redis.pttl(key) > 29_000, 'the shared window is never shortened')
})

t.test('without Redis the window stays local and nothing fails', async (t) => {
  const errors: unknown[] = []
  const window = new BackoffWindow({ shared: new SharedWindow({ redis: deadRedis(t), health: fakeHealth(), key: 'unused', onError: (error) => errors.push(error) }), telemetry: recordingTelemetry() })
  await window.open(5_000)
  const left = await window.check()
  t.ok(left > 4_000 && left <= 5_000)
  t.equal(errors.length, 2, 'both failures reported')
})

t.test('while Redis is known down, the shared window is not asked at all', async (t) => {
  const sent: string[] = []
  const redis = { pttl: async () => { sent.push('pttl'); return 60_000 }, eval: async () => { sent.push('eval'); return 1 } }
  const window = new BackoffWindow({ shared: new SharedWindow({ redis, health: fakeHealth(false), key: 'k', onError: () => {} }), telemetry: recordingTelemetry() })
  await window.open(1_000)
  t.ok(await window.check() <= 1_000, 'the local window only')
  t.same(sent, [], 'nothing sent to Redis')
})
