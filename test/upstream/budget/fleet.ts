import t from 'tap'
import { Clock, fakeHealth, testRedis } from '../../helper.ts'
import { countingEvals, instance, Outcomes, settingsOf, Timers } from './harness.ts'

const RPS = 50
const SECONDS = 10

t.test('two instances on one Redis: never more than rate x seconds + burst, in any window, and close to it', async (t) => {
  const { redis: raw, prefix } = testRedis(t)
  const { redis, evals } = countingEvals(raw)
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(RPS, 2)
  const shared = { redis, key: `${prefix}upstream:budget`, health: fakeHealth() }
  const a = instance({ clock, timers, settings, shared })
  const b = instance({ clock, timers, settings, shared })
  const calls = new Outcomes(clock)
  const done = new AbortController()
  // Both instances have far more callers than the budget: the bucket is the only bound.
  calls.ask(a, 'caller', 1_000, done.signal, 'a')
  calls.ask(b, 'caller', 1_000, done.signal, 'b')
  const start = clock.now()
  await timers.advance(SECONDS * 1000)
  const burst = settings.burst
  for (let s = 1; s <= SECONDS; s++) {
    const sent = calls.granted.filter((grant) => grant.at < start + s * 1000).length
    t.ok(sent <= RPS * s + burst, `first ${s} s: ${sent} calls <= ${RPS * s + burst}`)
  }
  const total = calls.granted.length
  t.ok(total >= 0.9 * (RPS * SECONDS + burst), `the budget is used, not wasted: ${total} calls`)
  t.ok(calls.peak(1000) <= RPS + burst, `any 1 s window: ${calls.peak(1000)} calls`)
  t.ok(calls.peak(1000, 'a') > 0 && calls.peak(1000, 'b') > 0, 'both instances are served')
  t.ok(calls.grantedOf('a') > total / 4 && calls.grantedOf('b') > total / 4, `shared fairly: ${calls.grantedOf('a')} / ${calls.grantedOf('b')}`)
  t.equal(calls.refused.length, 0, 'callers wait for budget: none refused before their deadline')
  t.ok(evals() < 0.75 * total, `${evals()} round trips to Redis for ${total} calls, each instance asking about once a lease period`)
  t.same(a.rate(), { rps: RPS, scope: 'fleet', shareRps: RPS / 2, instances: 2 })
  done.abort()
  await timers.idle()
})

t.test('two instances with uneven, bursty callers: within rate x window + burst for windows short and long', async (t) => {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(RPS, 2)
  const shared = { redis, key: `${prefix}upstream:budget`, health: fakeHealth() }
  const gates = [instance({ clock, timers, settings, shared }), instance({ clock, timers, settings, shared })]
  const calls = new Outcomes(clock)
  const done = new AbortController()
  let state = 7
  const random = (): number => { state = (state * 1_103_515_245 + 12_345) % 2 ** 31; return state / 2 ** 31 }
  // Mostly a trickle below the budget (calls in hand are kept for later ones), now and then a burst of 40.
  for (let step = 0; step < SECONDS * 100; step++) {
    for (const gate of gates) {
      if (random() < 0.1) calls.ask(gate, 'caller', Math.floor(random() * 4), done.signal)
      if (random() < 0.005) calls.ask(gate, 'caller', 40, done.signal)
    }
    await timers.advance(10)
  }
  t.ok(calls.granted.length > RPS * SECONDS * 0.8, `${calls.granted.length} calls`)
  for (const windowMs of [100, 250, 500, 1_000, 2_000]) {
    const bound = RPS * windowMs / 1000 + settings.burst
    t.ok(calls.peak(windowMs) <= bound, `any ${windowMs} ms: ${calls.peak(windowMs)} calls <= ${bound}`)
  }
  done.abort()
  await timers.idle()
})

t.test('a lease serves several calls: far fewer Redis round trips than calls', async (t) => {
  const { redis: raw, prefix } = testRedis(t)
  const { redis, evals } = countingEvals(raw)
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(1_000, 2)
  const gate = instance({ clock, timers, settings, shared: { redis, key: `${prefix}upstream:budget`, health: fakeHealth() } })
  const calls = new Outcomes(clock)
  // A steady 400 calls/s, below this instance's share, in 10 ms steps.
  for (let step = 0; step < 200; step++) {
    calls.ask(gate, 'caller', 4)
    await timers.advance(10)
  }
  t.equal(calls.granted.length, 800)
  t.ok(evals() <= calls.granted.length / 5, `${evals()} round trips for ${calls.granted.length} calls`)
})

t.test('without Redis each instance keeps to UPSTREAM_MAX_RPS / UPSTREAM_EXPECTED_INSTANCES', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(RPS, 2)
  const a = instance({ clock, timers, settings })
  const b = instance({ clock, timers, settings })
  const calls = new Outcomes(clock)
  const done = new AbortController()
  calls.ask(a, 'caller', 1_000, done.signal, 'a')
  calls.ask(b, 'caller', 1_000, done.signal, 'b')
  await timers.advance(SECONDS * 1000)
  const share = RPS / 2
  for (const name of ['a', 'b']) {
    const sent = calls.grantedOf(name)
    t.ok(sent <= share * SECONDS + settings.burst / 2 && sent >= 0.95 * share * SECONDS, `${name}: ${sent} calls at ${share}/s`)
    t.ok(calls.peak(1000, name) <= share + settings.burst / 2, `${name}: ${calls.peak(1000, name)} in the busiest second`)
  }
  t.same(a.rate(), { rps: share, scope: 'instance', shareRps: share, instances: 2 })
  done.abort()
  await timers.idle()
})
