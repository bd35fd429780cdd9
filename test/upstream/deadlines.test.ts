import t, { type Test } from 'tap'
import { cacheStack, Clock, eventually, metric, parseMetrics, stack, tally, usernames } from '../helper.ts'

// A caller's wait for the upstream, queue included, ends UPSTREAM_TIMEOUT_MS after it asked.

// Each test has an app and a simulator of its own and spends most of its time waiting on real deadlines, so the
// tests run side by side. Building an app holds the event loop for up to a few hundred ms at a time, so the tests
// whose first loads must fit a deadline of a few hundred ms, or whose timed margins are that short, run alone, first
// (`buffered: false`: tap starts such a test once those before it have ended, and runs the rest side by side after it).
t.jobs = 4

t.test('a stale entry is still served when the upstream would take longer than the deadline', { buffered: false }, async (t) => {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now, env: { UPSTREAM_TIMEOUT_MS: '300', PROFILE_TTL_SECONDS: '60' } })
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  clock.advance(61_000)
  sim.failAlways({ kind: 'hang' })
  const started = Date.now()
  const res = await app.inject('/profile/alice')
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-cache'], 'STALE')
  t.ok(Date.now() - started < 300, 'at once, while the revalidation runs into its own deadline')
  await eventually(() => sim.stats.abortedResponses === 1, 'the revalidation was aborted at its deadline')
})

t.test('callers queued behind a slow upstream leave the queue with 504 once their time cannot cover a call, never sent', { buffered: false }, async (t) => {
  // One slot, 700 ms per call, 1 s of budget: the first is served; the upstream has been taking 700 ms, so the
  // others leave the queue 300 ms in (their remaining time below 700 ms), answered 504 without reaching it.
  const timeoutMs = 1_000
  const { app, sim } = await stack(t, { env: { UPSTREAM_MAX_CONCURRENCY: '1', UPSTREAM_TIMEOUT_MS: String(timeoutMs) }, sim: { latencyMs: 700 } })
  await app.tokens.getToken()
  t.equal((await app.inject('/profile/warm')).statusCode, 200, 'token held, connection open, one duration learnt')
  const callsBefore = sim.stats.dataCalls

  const started = Date.now()
  const answers = await Promise.all(usernames(6).map(async (name) => {
    const res = await app.inject(`/profile/${name}`)
    return { res, waitedMs: Date.now() - started }
  }))
  t.same(tally(answers.map(({ res }) => res)), { 200: 1, '504 UPSTREAM_TIMEOUT': 5 })
  const longest = Math.max(...answers.map(({ waitedMs }) => waitedMs))
  t.ok(longest < timeoutMs + 250, `every caller answered within the deadline and a margin (longest ${longest} ms)`)
  t.equal(sim.stats.dataCalls - callsBefore, 1, 'only the call that could be answered was sent')
  t.equal(sim.stats.abortedResponses, 0, 'none was cut off at the upstream')
  t.equal(app.upstream.breakerState, 'closed')
  sim.options.latencyMs = 0 // what is checked is that the slot is free (taken within 300 ms), not another 700 ms call
  t.equal((await app.inject('/profile/afterwards')).statusCode, 200, 'the queue drained')
})

t.test('a queued call whose deadline passed on the app clock is dropped when its slot comes, without calling the upstream', async (t) => {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now, env: { UPSTREAM_MAX_CONCURRENCY: '1' }, sim: { latencyMs: 200 } })
  t.equal((await app.inject('/profile/warm')).statusCode, 200)

  const first = app.inject('/profile/first')
  const queued = app.inject('/profile/queued')
  await eventually(() => sim.callsFor('profile', 'first') === 1, 'the first holds the only slot')
  clock.advance(5_000) // UPSTREAM_TIMEOUT_MS, by the app's clock, while the second waits

  t.equal((await first).statusCode, 200)
  const res = await queued
  t.same(res.json(), { statusCode: 504, code: 'UPSTREAM_TIMEOUT', error: 'Gateway Timeout', message: 'The profile service did not answer within 5000 ms' })
  t.equal(sim.callsFor('profile', 'queued'), 0, 'never sent')
})

/** An app on the app clock whose upstream has been taking `takesMs` (by that clock): each call held while the clock moves. */
async function slowUpstream (t: Test, takesMs: number, env: Record<string, string>) {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now, env: { UPSTREAM_MAX_CONCURRENCY: '1', ...env }, sim: { latencyMs: 100 } })
  await app.tokens.getToken()
  for (const name of ['slow-1', 'slow-2', 'slow-3']) {
    const res = app.inject(`/profile/${name}`)
    await eventually(() => sim.callsFor('profile', name) === 1, `${name} is at the upstream`)
    clock.advance(takesMs)
    t.equal((await res).statusCode, 200)
  }
  return { app, sim, clock }
}

t.test('a queued call is not sent once its caller\'s remaining time is below what the upstream has been taking', async (t) => {
  // 2 s of budget, an upstream that has been taking 1.5 s: a queued call may wait 500 ms for its slot, no more.
  const { app, sim } = await slowUpstream(t, 1_500, { UPSTREAM_TIMEOUT_MS: '2000' })

  const served = app.inject('/profile/holder-1')
  await eventually(() => sim.callsFor('profile', 'holder-1') === 1, 'the holder has the only slot')
  const inTime = await app.inject('/profile/in-time')
  t.equal(inTime.statusCode, 200, 'a slot within 500 ms (the holder takes 100): sent and answered')
  t.equal((await served).statusCode, 200)

  sim.failNext({ kind: 'hang' })
  const hung = app.inject('/profile/holder-2')
  await eventually(() => sim.callsFor('profile', 'holder-2') === 1, 'the holder has the only slot, and keeps it')
  const started = Date.now()
  const late = await app.inject('/profile/late')
  const waitedMs = Date.now() - started
  t.same(late.json(), { statusCode: 504, code: 'UPSTREAM_TIMEOUT', error: 'Gateway Timeout', message: 'The profile service did not answer within 2000 ms' })
  t.ok(waitedMs < 1_000, `answered once its time could no longer cover a call (${waitedMs} ms), not at its deadline`)
  t.equal(sim.callsFor('profile', 'late'), 0, 'never sent')
  const metrics = parseMetrics((await app.inject('/metrics')).body)
  t.equal(metric(metrics, 'pbff_upstream_calls_total', { resource: 'profile', outcome: 'short_circuited' }), 1)
  t.equal((await hung).statusCode, 504, 'the holder itself ran into its deadline')
})

t.test('a full queue answers 503 UPSTREAM_OVERLOADED with Retry-After: what the upstream has been taking, in whole seconds', async (t) => {
  const { app, sim } = await slowUpstream(t, 1_500, { UPSTREAM_TIMEOUT_MS: '1800' })
  sim.failAlways({ kind: 'hang' })
  // One slot and eight places: the tenth lookup finds the queue full.
  const lookups = usernames(10).map(async (name) => await app.inject(`/profile/${name}`))
  // The refusal is answered at once; the nine others wait out their deadlines (answered 504 as the app closes).
  const refused = await Promise.race(lookups)
  t.equal(refused.statusCode, 503)
  t.match(refused.json(), { code: 'UPSTREAM_OVERLOADED' })
  t.equal(refused.headers['retry-after'], '2', '1.5 s, rounded up')
})

t.test('a caller waiting for another instance\'s load waits no longer than its own time, from when it asked', async (t) => {
  // The upstream hangs: instance A's load holds the key's lock for its whole 2 s; B, asked meanwhile, waits for it.
  const timeoutMs = 2_000
  const { app, sim, another } = await cacheStack(t, { env: { UPSTREAM_TIMEOUT_MS: String(timeoutMs) } })
  const b = await another()
  sim.failAlways({ kind: 'hang' })
  const first = app.inject('/profile/hung')
  await eventually(() => sim.callsFor('profile', 'hung') === 1, 'A\'s call is at the upstream')
  const asked = Date.now()
  const waiter = await b.inject('/profile/hung')
  const waitedMs = Date.now() - asked
  t.equal(waiter.statusCode, 504)
  t.equal(waiter.json().code, 'UPSTREAM_TIMEOUT')
  // Before, B waited for A's lock (up to 2 s), then loaded itself (2 s more).
  t.ok(waitedMs < timeoutMs + 1_000, `answered within its own time and a margin (${waitedMs} ms)`)
  t.equal((await first).statusCode, 504)
  sim.failAlways(undefined)
})
