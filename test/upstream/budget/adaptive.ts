import t from 'tap'
import { Clock, fakeHealth, testRedis, type TestContext } from '../../helper.ts'
import { instance, Outcomes, recordingBudgetTelemetry, settingsOf, Timers } from './harness.ts'

const RPS = 50

/** Two instances on one Redis, 50 calls/s between them. */
function fleet (t: TestContext) {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(RPS, 2)
  const shared = { redis, key: `${prefix}upstream:budget`, health: fakeHealth() }
  const telemetry = recordingBudgetTelemetry()
  const a = instance({ clock, timers, settings, shared, telemetry })
  const b = instance({ clock, timers, settings, shared })
  return { clock, timers, a, b, telemetry, calls: new Outcomes(clock) }
}

t.test('an upstream 429 halves the fleet\'s rate for every instance; it climbs back by a tenth of the rate per second', async (t) => {
  const { timers, a, b, telemetry, calls } = fleet(t)
  await a.slowDown(0)
  t.match(a.rate(), { rps: 25, scope: 'fleet' })
  t.equal(b.rate().rps, 50, 'b has not asked Redis since')
  calls.ask(b, 'caller')
  await timers.idle()
  t.equal(b.rate().rps, 25, 'b\'s next lease brings the fleet\'s rate')
  await timers.advance(1_000)
  t.equal(a.rate().rps, 30, 'computed from the halving\'s time, without asking Redis')
  t.equal(b.rate().rps, 30)
  await timers.advance(4_000)
  t.equal(a.rate().rps, 50, 'back to the configured rate after five seconds')
  await timers.advance(1_000)
  t.equal(a.rate().rps, 50, 'and never above it')
  t.same(telemetry.events, ['rate:25:fleet'], 'the effective rate reported when a\'s view of it changes')
})

t.test('a volley of 429s halves once; one after the cooldown halves again; never below a sixteenth of the rate', async (t) => {
  const { timers, a, b } = fleet(t)
  await Promise.all([a.slowDown(0), a.slowDown(0), b.slowDown(0), b.slowDown(0)])
  t.equal(a.rate().rps, 25)
  t.equal(b.rate().rps, 25, 'the calls in flight answered 429 together: one halving')
  await timers.advance(1_000)
  await b.slowDown(0)
  t.equal(b.rate().rps, 15, 'a second later, 30 halved')
  // A Retry-After each time: no recovery in between.
  for (let i = 0; i < 10; i++) {
    await timers.advance(1_000)
    await a.slowDown(60_000)
  }
  t.equal(a.rate().rps, RPS / 16)
})

t.test('a Retry-After holds the halved rate until it ends, then it recovers', async (t) => {
  const { timers, a } = fleet(t)
  await a.slowDown(3_000)
  await timers.advance(2_900)
  t.equal(a.rate().rps, 25)
  await timers.advance(1_100)
  t.equal(a.rate().rps, 30)
})

t.test('calls after a halving keep to the halved rate as it recovers', async (t) => {
  const { clock, timers, a, b, calls } = fleet(t)
  const done = new AbortController()
  calls.ask(a, 'caller', 1_000, done.signal)
  calls.ask(b, 'caller', 1_000, done.signal)
  await timers.advance(2_000)
  await a.slowDown(0)
  const halvedAt = clock.now()
  await timers.advance(2_000)
  const after = calls.granted.filter((grant) => grant.at >= halvedAt).length
  // 25 calls/s climbing to 35 over two seconds: 60 calls, and those the instances held when the 429 came.
  t.ok(after <= 60 + 5 && after >= 50, `${after} calls in the two seconds after the halving (100 before it)`)
  await timers.advance(5_000)
  const recovered = clock.now()
  await timers.advance(1_000)
  const last = calls.granted.filter((grant) => grant.at >= recovered).length
  // 50 calls/s, and those the two instances held when the second began (a lease's slice each, on real Redis timing).
  t.ok(last >= 45 && last <= 50 + 2 * 3, `${last} calls in a second once recovered`)
  done.abort()
  await timers.idle()
})

t.test('without Redis, a 429 halves this instance\'s share, which recovers alike', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const gate = instance({ clock, timers, settings: settingsOf(RPS, 2) })
  const calls = new Outcomes(clock)
  const done = new AbortController()
  calls.ask(gate, 'caller', 1_000, done.signal)
  await timers.advance(2_000)
  await gate.slowDown(0)
  t.same(gate.rate(), { rps: 12.5, scope: 'instance', shareRps: 12.5, instances: 2 })
  const halvedAt = clock.now()
  await timers.advance(1_000)
  t.equal(gate.rate().rps, 15)
  await timers.advance(1_000)
  const after = calls.granted.filter((grant) => grant.at >= halvedAt).length
  // 12.5 calls/s climbing to 17.5 over two seconds: 30 calls.
  t.ok(after <= 31 && after >= 27, `${after} calls in the two seconds after the halving (50 before it)`)
  done.abort()
  await timers.idle()
})
