import t from 'tap'
import { retryAfterOf } from '../../../src/errors.ts'
import type { CallBudget } from '../../../src/upstream/budget/call-budget.ts'
import { Clock, fakeHealth, testRedis } from '../../helper.ts'
import { instance, recordingBudgetTelemetry, settingsOf, Timers } from './harness.ts'

// A caller the budget is too short to reach before it must be sent is refused at once, not at its deadline
// (issue 25 point 6: within its deadline, and no caller waits all its time for a 503).

/** What became of one call through `gate`, and when (the test's clock). */
function ask (gate: CallBudget, clock: Clock, sendBy: number): { outcome: Promise<{ at: number, error?: unknown }> } {
  const outcome = gate.acquire('caller', new AbortController().signal, sendBy).then(
    () => ({ at: clock.now() }),
    (error: unknown) => ({ at: clock.now(), error })
  )
  return { outcome }
}

t.test('while the budget is short, a caller whose wait would outlast its time is refused at once, with when to come back', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const telemetry = recordingBudgetTelemetry()
  // One instance at 1 call/s, a bucket of one call.
  const gate = instance({ clock, timers, settings: settingsOf(1, 1, 1), telemetry })
  const start = clock.now()
  const first = ask(gate, clock, Infinity)
  await timers.idle()
  const a = ask(gate, clock, start + 1_500)
  await timers.idle()
  // Asked without counting (as a cold read asks before it claims a lock): where refusesNow would refuse, and only there.
  t.equal(gate.refuses('caller', start + 900), true, 'a caller it cannot reach in time')
  t.equal(gate.refuses('caller', start + 5_000), false, 'not one it can reach')
  t.equal(gate.refuses('background', start + 900), false, 'nor background work, which waits instead')
  // Short now: one caller ahead at 1 call/s, so it would be sent 1 s from now at the soonest, after its 0.9 s.
  const b = ask(gate, clock, start + 900)
  const c = ask(gate, clock, start + 5_000)
  await timers.idle()
  const refused = await b.outcome
  t.equal(refused.at, start, 'refused before any time passed')
  t.match(refused.error, { statusCode: 503, code: 'UPSTREAM_BUDGET_EXHAUSTED' })
  t.equal(retryAfterOf(refused.error), 1, 'come back once the callers queued now have been served')
  await timers.advance(5_000)
  t.same(await first.outcome, { at: start }, 'the burst')
  // The gate asks again at the refill, give or take half its delay (the jitter that spreads instances' retries).
  const [servedA, servedC] = [await a.outcome, await c.outcome]
  t.ok(servedA.error === undefined && servedA.at <= start + 1_500, `a wait its time covers is waited: sent at ${servedA.at - start} ms`)
  t.ok(servedC.error === undefined && servedC.at > servedA.at && servedC.at <= start + 5_000, `sent at ${servedC.at - start} ms`)
  t.same(telemetry.events.filter((event) => !event.startsWith('rate:')), [
    'call:caller', 'deferred:caller', 'dropped:caller:deadline', 'deferred:caller', 'call:caller', 'call:caller'
  ], 'the refused caller never queued')
})

t.test('callers queued before the budget turned out short are told at once, by their place in the line, when it does', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const gate = instance({ clock, timers, settings: settingsOf(1, 1, 1) })
  const start = clock.now()
  // A burst: all five queue while the first lease is on its way, nobody knowing yet what the budget holds. The
  // fourth has 1.5 s: the first takes the bucket's one call, and the fourth's place is 2 s away at 1 call/s.
  const burst = [Infinity, Infinity, Infinity, start + 1_500, Infinity].map((sendBy) => ask(gate, clock, sendBy))
  await timers.idle()
  const refused = await burst[3]?.outcome
  t.equal(refused?.at, start, 'told as soon as the lease came back short')
  t.match(refused?.error, { code: 'UPSTREAM_BUDGET_EXHAUSTED' })
  await timers.advance(5_000)
  const served = await Promise.all([0, 1, 2, 4].map(async (index) => await burst[index]?.outcome))
  t.ok(served.every((outcome) => outcome?.error === undefined), 'the others are all served: the refused one\'s place went to the one behind it')
  t.same(served.map((outcome) => outcome?.at), served.map((outcome) => outcome?.at).sort((a = 0, b = 0) => a - b), 'in their order')
})

t.test('while calls are in hand or a lease is on its way, nobody is refused for the time it might wait', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const gate = instance({ clock, timers, settings: settingsOf(1, 1, 1) })
  const start = clock.now()
  // The first lease is on its way: the budget is not known to be short, whatever the callers' time.
  const asked = [ask(gate, clock, start + 100), ask(gate, clock, start + 100)]
  await timers.advance(2_000)
  const [granted, late] = await Promise.all(asked.map(async (call) => await call.outcome))
  t.same(granted, { at: start })
  t.equal(late?.error, undefined, 'not refused on arrival: granted when the budget refilled (its deadline is its signal\'s to enforce)')
})

t.test('an instance served faster than its share (the others idle) admits the callers that rate can reach', async (t) => {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const timers = new Timers(clock)
  // Two instances expected, one busy: the fleet's 10 calls/s are all its own, twice its share of 5.
  const settings = settingsOf(10, 2, 10)
  const gate = instance({ clock, timers, settings, shared: { redis, key: `${prefix}upstream:budget`, health: fakeHealth() } })
  const start = clock.now()
  const backlog = new AbortController()
  const queued = Array.from({ length: 40 }, async () => { await gate.acquire('caller', backlog.signal).catch(() => {}) })
  await timers.advance(2_000)
  // 30 callers served (the burst, then 10 a second), 10 still queued: at the 10 calls/s it has been served at, this
  // one will be sent in about 1 s; at its share, 5 calls/s, it would be 2 s, after its 1.8 s.
  const admitted = ask(gate, clock, clock.now() + 1_800)
  await timers.advance(1_800)
  const { at, error } = await admitted.outcome
  t.equal(error, undefined, 'admitted: the rate it has been served at covers its wait')
  t.ok(at <= start + 3_800, `and sent in time: ${at - start - 2_000} ms after it asked`)
  backlog.abort()
  await Promise.all(queued)
})

t.test('a live fleet larger than the burst (20 instances, the others idle): the callers one call a second reaches are served, none refused, none kept waiting for calls the bucket cannot hold', async (t) => {
  const { redis, prefix } = testRedis(t)
  for (const [rps, burst] of [[1, 1], [2, 1], [10, 5]] as const) {
    const clock = new Clock()
    const timers = new Timers(clock)
    const settings = settingsOf(rps, 20, burst)
    const gate = instance({ clock, timers, settings, shared: { redis, key: `${prefix}${rps}:upstream:budget`, health: fakeHealth() }, members: { lastSeen: 20, recentMost: 20 } })
    // As many callers as one call a second sends before their 4.5 s are up (the pace the gate judges by once it has
    // granted one: it counts on no more of a fleet whose share is a twentieth of the rate).
    const callers = 4
    const start = clock.now()
    const outcomes: Array<{ at: number, error?: unknown }> = []
    for (let i = 0; i < callers; i++) ask(gate, clock, start + 4_500).outcome.then((outcome) => { outcomes.push(outcome) }, () => {})
    await timers.advance(5_000)
    const refused = outcomes.filter((outcome) => outcome.error !== undefined)
    t.equal(outcomes.length, callers, `${rps}/s, burst ${burst}: every caller answered within its time`)
    t.equal(refused.length, 0, `${rps}/s, burst ${burst}: ${callers} callers, none refused (waits ${outcomes.map((outcome) => outcome.error === undefined ? outcome.at - start : '503').join(', ')} ms)`)
  }
})
