import t from 'tap'
import { CallBudget } from '../../../src/upstream/budget/call-budget.ts'
import { Clock, deadRedis, fakeHealth, testRedis } from '../../helper.ts'
import { instance, Outcomes, settingsOf, Timers } from './harness.ts'

const RPS = 50

t.test('Redis going down mid-way: each instance keeps to its share, and no caller hears of it', async (t) => {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(RPS, 2)
  const health = fakeHealth()
  const errors: unknown[] = []
  const shared = { redis, key: `${prefix}upstream:budget`, health }
  const a = instance({ clock, timers, settings, shared, errors })
  const b = instance({ clock, timers, settings, shared, errors })
  const calls = new Outcomes(clock)
  const done = new AbortController()
  calls.ask(a, 'caller', 1_000, done.signal, 'a')
  calls.ask(b, 'caller', 1_000, done.signal, 'b')
  await timers.advance(3_000)
  t.equal(a.rate().scope, 'fleet')
  health.up = false
  const downAt = clock.now()
  await timers.advance(3_000)
  for (const name of ['a', 'b']) {
    const sent = calls.granted.filter((grant) => grant.tag === name && grant.at >= downAt).length
    // Its share for three seconds, its own bucket (a share of the burst), and what it held when Redis went.
    t.ok(sent >= 0.9 * 25 * 3 && sent <= 25 * 3 + 25 + 2, `${name}: ${sent} calls in the three seconds without Redis`)
  }
  t.same(a.rate(), { rps: 25, scope: 'instance', shareRps: 25, instances: 2 })
  t.ok(calls.peak(1000) <= 50 + settings.burst, `the fleet's busiest second, across the outage: ${calls.peak(1000)} calls`)
  t.equal(calls.refused.length, 0, 'no caller refused')
  t.same(errors, [], 'nothing sent to a Redis known to be down')
  health.up = true
  await timers.advance(1_000)
  t.equal(a.rate().scope, 'fleet', 'back on the fleet\'s bucket with its next lease')
  done.abort()
  await timers.idle()
})

t.test('a Redis answering slowly within its bound: callers are served, within the bound, at every delay, a lease of 100 ms or 20 ms', async (t) => {
  const { redis, prefix } = testRedis(t)
  // At 50 calls/s a lease lasts 100 ms, at 100 calls/s with a burst of 10 it lasts 20 ms: delays on either side of
  // it, up to the Redis layer's 500 ms bound.
  for (const [rps, burst] of [[50, 50], [100, 10]] as const) {
    for (const delayMs of [0, 19, 50, 99, 100, 150, 300, 499]) {
      const clock = new Clock()
      const timers = new Timers(clock)
      const settings = settingsOf(rps, 2, burst)
      const start = clock.now()
      // Each answer is read `delayMs` after it was asked for, on the test's clock (answers asked for together, together).
      const slow = Object.assign(Object.create(redis) as typeof redis, {
        eval: async (...args: Parameters<typeof redis.eval>) => {
          // Leases that never serve anyone would go on for ever: a failure, not a hang.
          if (clock.now() > start + 60_000) throw new Error('a minute of leases')
          const due = clock.now() + delayMs
          const reply = await redis.eval(...args)
          clock.advance(Math.max(0, due - clock.now()))
          return reply
        }
      })
      const errors: unknown[] = []
      const shared = { redis: slow, key: `${prefix}${rps}-${delayMs}:upstream:budget`, health: fakeHealth() }
      const a = instance({ clock, timers, settings, shared, errors })
      const b = instance({ clock, timers, settings, shared, errors })
      const calls = new Outcomes(clock)
      const done = new AbortController()
      calls.ask(a, 'caller', 3 * rps, done.signal, 'a')
      calls.ask(b, 'caller', 3 * rps, done.signal, 'b')
      await timers.advance(4_000)
      const seconds = (clock.now() - start) / 1000
      const label = `${rps}/s, burst ${burst}, ${delayMs} ms`
      // The fleet's rate, near enough, and neither instance starved (the fleet's bucket need not split it evenly).
      t.ok(calls.granted.length >= 0.8 * rps * seconds, `${label}: ${calls.granted.length} calls served in ${seconds.toFixed(2)} s`)
      // The fleet's bucket serves whoever asks first, and one instance may spend a spell on its share while the other
      // leases: neither gets none, a quarter of an even split at least (36 of 100 seen at 100 ms).
      for (const name of ['a', 'b']) t.ok(calls.grantedOf(name) >= (rps / 2) * seconds / 4, `${label}: ${name} served ${calls.grantedOf(name)}`)
      // Near a lease's time one instance may find Redis too slow while the other still leases: it then sends its share
      // uncounted by the fleet (the open case of docs/upstream-budget.md). Past twice that time neither leases.
      const bound = rps + burst + (delayMs > 0 && delayMs < 2 * settings.leaseMs ? rps / 2 : 0)
      t.ok(calls.peak(1000) <= bound, `${label}: the fleet's busiest second ${calls.peak(1000)} calls (bound ${bound})`)
      t.equal(calls.refused.length, 0, `${label}: no caller refused`)
      t.same(errors, [], `${label}: no error`)
      done.abort()
      await timers.idle()
    }
  }
})

t.test('across Redis going down and coming back, the fleet keeps to rate x window + burst in short windows too', async (t) => {
  const { redis, prefix } = testRedis(t)
  const bound = (windowMs: number): number => 100 * windowMs / 1000 + 100
  const scenarios = [
    'down: one instance took the burst, the other was idle',
    'back: both idle through the outage, then a rush as it ends',
    'back: one sent on its share just before the end, the other, idle throughout, gets a rush after it'
  ] as const
  for (const [index, scenario] of scenarios.entries()) {
    const clock = new Clock()
    const timers = new Timers(clock)
    const settings = settingsOf(100, 2, 100)
    // As RedisHealth does, it tells the instances when Redis goes (an idle one learns of the outage that way).
    const listeners: Array<(up: boolean) => void> = []
    const health = Object.assign(fakeHealth(scenario.startsWith('down')), { listen: (listener: (up: boolean) => void) => { listeners.push(listener) } })
    const turn = (up: boolean): void => { health.up = up; for (const listener of listeners) listener(up) }
    const shared = { redis, key: `${prefix}${index}:upstream:budget`, health }
    const a = instance({ clock, timers, settings, shared, members: { lastSeen: 2, recentMost: 2 } })
    const b = instance({ clock, timers, settings, shared, members: { lastSeen: 2, recentMost: 2 } })
    const calls = new Outcomes(clock)
    const done = new AbortController()
    if (index === 0) {
      calls.ask(a, 'caller', 150, done.signal)
      await timers.advance(50)
      turn(false)
      calls.ask(b, 'caller', 150, done.signal)
    } else if (index === 1) {
      await timers.advance(2_000)
      calls.ask(a, 'caller', 150, done.signal)
      calls.ask(b, 'caller', 150, done.signal)
      await timers.advance(50)
      turn(true)
    } else {
      // Redis was up when they started, then went: b sends on its share, a is idle.
      health.up = true
      turn(false)
      await timers.advance(2_000)
      calls.ask(b, 'caller', 50, done.signal)
      await timers.advance(50)
      turn(true)
      calls.ask(a, 'caller', 150, done.signal)
    }
    await timers.advance(1_000)
    for (const windowMs of [100, 200, 400, 1_000]) {
      t.ok(calls.peak(windowMs) <= bound(windowMs), `${scenario}: ${calls.peak(windowMs)} calls in the busiest ${windowMs} ms (bound ${bound(windowMs)})`)
    }
    t.ok(calls.granted.length >= 100, `${scenario}: ${calls.granted.length} calls served in the second after (the rate's worth at least)`)
    done.abort()
    await timers.idle()
  }
})

t.test('after a spell of Redis too slow for a lease, the fleet\'s bucket is emptied on the way back; long after an outage, it is not', async (t) => {
  const { redis, prefix } = testRedis(t)
  const bound = (windowMs: number): number => 100 * windowMs / 1000 + 100
  {
    // One lease answered in 300 ms, then Redis is quick again; a rush just before the 5 s on the share end.
    const clock = new Clock()
    const timers = new Timers(clock)
    let delayMs = 300
    const slow = Object.assign(Object.create(redis) as typeof redis, {
      eval: async (...args: Parameters<typeof redis.eval>) => {
        const due = clock.now() + delayMs
        const reply = await redis.eval(...args)
        clock.advance(Math.max(0, due - clock.now()))
        return reply
      }
    })
    const gate = instance({ clock, timers, settings: settingsOf(100, 1, 100), shared: { redis: slow, key: `${prefix}slow:upstream:budget`, health: fakeHealth() } })
    const calls = new Outcomes(clock)
    const done = new AbortController()
    calls.ask(gate, 'caller', 1, done.signal)
    await timers.advance(400)
    t.equal(gate.rate().scope, 'instance', 'on its share after a lease that came back spent')
    delayMs = 0
    await timers.advance(4_850)
    calls.ask(gate, 'caller', 300, done.signal)
    await timers.advance(1_000)
    for (const windowMs of [100, 200, 1_000]) t.ok(calls.peak(windowMs) <= bound(windowMs), `back from the slow spell: ${calls.peak(windowMs)} calls in the busiest ${windowMs} ms (bound ${bound(windowMs)})`)
    done.abort()
    await timers.idle()
  }
  {
    // Redis down 2 s, then up a minute; b, idle throughout, leases for the first time while a has a rush.
    const clock = new Clock()
    const timers = new Timers(clock)
    const listeners: Array<(up: boolean) => void> = []
    const health = Object.assign(fakeHealth(true), { listen: (listener: (up: boolean) => void) => { listeners.push(listener) } })
    const turn = (up: boolean): void => { health.up = up; for (const listener of listeners) listener(up) }
    const shared = { redis, key: `${prefix}late:upstream:budget`, health }
    const a = instance({ clock, timers, settings: settingsOf(100, 2, 100), shared, members: { lastSeen: 2, recentMost: 2 } })
    const b = instance({ clock, timers, settings: settingsOf(100, 2, 100), shared, members: { lastSeen: 2, recentMost: 2 } })
    const calls = new Outcomes(clock)
    const done = new AbortController()
    turn(false)
    await timers.advance(2_000)
    turn(true)
    calls.ask(a, 'caller', 1, done.signal, 'warm')
    await timers.advance(60_000)
    calls.ask(b, 'caller', 1, done.signal, 'b')
    await timers.advance(5)
    calls.ask(a, 'caller', 100, done.signal, 'rush')
    await timers.advance(100)
    t.ok(calls.grantedOf('rush') >= 90, `a minute after Redis came back, b's first lease drains nothing: ${calls.grantedOf('rush')} of a's rush of 100 served within 100 ms`)
    done.abort()
    await timers.idle()
  }
})

t.test('an instance starting, Redis coming up for it, leaves the fleet\'s bucket as it is', async (t) => {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const timers = new Timers(clock)
  const settings = settingsOf(100, 2, 100)
  const key = `${prefix}start:upstream:budget`
  const running = instance({ clock, timers, settings, shared: { redis, key, health: fakeHealth() }, members: { lastSeen: 2, recentMost: 2 } })
  const listeners: Array<(up: boolean) => void> = []
  const health = Object.assign(fakeHealth(false), { listen: (listener: (up: boolean) => void) => { listeners.push(listener) } })
  const started = instance({ clock, timers, settings, shared: { redis, key, health }, members: { lastSeen: 2, recentMost: 2 } })
  health.up = true
  for (const listener of listeners) listener(true)
  const calls = new Outcomes(clock)
  const done = new AbortController()
  calls.ask(started, 'caller', 1, done.signal, 'started')
  await timers.advance(5)
  calls.ask(running, 'caller', 100, done.signal, 'rush')
  await timers.advance(100)
  t.ok(calls.grantedOf('rush') >= 90, `the new instance's first lease drains nothing: ${calls.grantedOf('rush')} of a rush of 100 served within 100 ms`)
  done.abort()
  await timers.idle()
})

t.test('a command that fails before Redis is known to be down is reported, and the call comes from the share at once', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const errors: unknown[] = []
  const gate = instance({ clock, timers, settings: settingsOf(RPS, 2), errors, shared: { redis: deadRedis(t), key: 'unused', health: fakeHealth() } })
  const calls = new Outcomes(clock)
  calls.ask(gate, 'caller', 3)
  await timers.idle()
  t.equal(calls.granted.length, 3, 'a flap costs no caller: from what its own bucket holds')
  t.ok(errors.length >= 1, 'each failed command reported (RedisHealth would then mark Redis down)')
  t.equal(gate.rate().scope, 'instance')
  const reported = errors.length
  await gate.slowDown(0)
  t.equal(errors.length, reported + 1, 'a halving Redis did not take is reported')
  t.equal(gate.rate().rps, 12.5, 'and this instance\'s share halved')
})

t.test('a lease that fails unexpectedly is asked for again a little later, not at once', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const errors: unknown[] = []
  let leases = 0
  const gate = new CallBudget({
    source: {
      lease: async (need, _demand, _reserve, now) => {
        if (++leases === 1) throw new Error('a bug')
        return { granted: need, retryInMs: 0, lapsesAt: now + 100 }
      },
      slowDown: async () => {},
      rate: () => ({ rps: RPS, scope: 'instance', shareRps: RPS, instances: 1 })
    },
    now: clock.now,
    schedule: timers.schedule,
    // No spread: the retry comes at its delay.
    random: () => 0.5,
    onError: (error) => { errors.push(error) }
  })
  const calls = new Outcomes(clock)
  calls.ask(gate, 'caller')
  await timers.advance(99)
  t.equal(leases, 1)
  t.equal(calls.granted.length, 0)
  await timers.advance(50)
  t.equal(leases, 2)
  t.equal(calls.granted.length, 1)
  t.match(errors, [{ message: 'a bug' }])
})
