import t from 'tap'
import { BackoffWindow, type SharedBackoff } from '../../../src/upstream/backoff-window.ts'
import { SharedWindow, type SharedWindowOptions } from '../../../src/redis/shared-window.ts'
import { busInstance, Clock, deadRedis, eventually, fakeHealth, recordingTelemetry, testRedis } from '../../helper.ts'

t.test('a window opens, counts down and closes, reported once each way', async (t) => {
  const clock = new Clock()
  const telemetry = recordingTelemetry()
  const window = new BackoffWindow({ telemetry, now: clock.now })
  t.equal(window.check(), 0)
  await window.open(7_000)
  t.equal(window.remainingMs, 7_000)
  clock.advance(2_000)
  t.equal(window.check(), 5_000)
  await window.open(1_000)
  t.equal(window.remainingMs, 5_000, 'a shorter Retry-After does not shorten the window')
  clock.advance(5_000)
  t.equal(window.check(), 0)
  t.same(telemetry.events, ['backoff:true', 'backoff:false'])
})

/** One instance's back-off window on the shared Redis, told on the bus as the app builds it. */
function sharedWindowOf (events: SharedBackoff['bus'], redis: SharedWindowOptions['redis'], key: string, health = fakeHealth(), errors: unknown[] = []): BackoffWindow {
  const window = new SharedWindow({ redis, health, key, onError: (error) => errors.push(error) })
  return new BackoffWindow({ shared: { window, bus: events, name: key, onError: (error) => errors.push(error) }, telemetry: recordingTelemetry() })
}

t.test('with Redis, one instance\'s window holds for every instance, told on the bus: no Redis command per call', async (t) => {
  const { redis, prefix } = testRedis(t)
  const key = `${prefix}upstream:backoff`
  const channel = `${prefix}events`
  const a = sharedWindowOf((await busInstance(t, channel)).events, redis, key)
  const bInstance = await busInstance(t, channel)
  const sent: string[] = []
  const counted = { pttl: async (k: string) => { sent.push('pttl'); return await redis.pttl(k) }, eval: redis.eval.bind(redis) }
  const b = sharedWindowOf(bInstance.events, counted as unknown as SharedWindowOptions['redis'], key)
  await eventually(() => sent.length === 1, 'b read the window once, its bus being ready')
  t.equal(b.check(), 0, 'no window yet')
  // 300 s, read against 290: these windows run on the real clock and Redis's, which a busy machine may stall for seconds.
  await a.open(300_000)
  await eventually(() => b.remainingMs > 290_000, 'b hears a\'s window')
  t.ok(b.check() > 290_000 && b.check() <= 300_000, 'and refuses by it')
  t.same(sent, ['pttl'], 'without asking Redis again')
  await b.open(1_000)
  t.ok(await redis.pttl(key) > 290_000, 'the shared window is never shortened')
})

t.test('an instance whose bus comes back reads the window it may have missed', async (t) => {
  const { redis, prefix } = testRedis(t)
  const key = `${prefix}upstream:backoff`
  // 300 s, read against 290, on the real clock: a stall of a second no longer fails it.
  await redis.set(key, '1', 'PX', 300_000)
  const { events } = await busInstance(t, `${prefix}events`)
  const late = sharedWindowOf(events, redis, key)
  await eventually(() => late.remainingMs > 290_000, 'read when it starts with its bus ready')
  t.ok(late.check() > 290_000, 'and refused by')
})

t.test('without Redis the window stays local and nothing fails', async (t) => {
  const errors: unknown[] = []
  const events = { ready: false, listenWindows: () => {}, listenReady: () => {}, publishWindow: async () => { throw new Error('down') } }
  const window = sharedWindowOf(events, deadRedis(t), 'unused', fakeHealth(), errors)
  await window.open(5_000)
  const left = window.check()
  t.ok(left > 4_000 && left <= 5_000)
  t.equal(errors.length, 2, 'the extension and the event: both failures reported')
})

t.test('while Redis is known down, the shared window is not asked at all', async (t) => {
  const sent: string[] = []
  const redis = { pttl: async () => { sent.push('pttl'); return 60_000 }, eval: async () => { sent.push('eval'); return 1 } }
  const events = { ready: true, listenWindows: () => {}, listenReady: () => {}, publishWindow: async () => {} }
  const window = sharedWindowOf(events, redis, 'k', fakeHealth(false))
  await window.open(1_000)
  t.ok(window.check() <= 1_000, 'the local window only')
  t.same(sent, [], 'nothing sent to Redis')
})
