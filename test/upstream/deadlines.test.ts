import t from 'tap'
import { Clock, eventually, stack, tally, usernames } from '../helper.ts'

// A caller's wait for the upstream, queue included, ends UPSTREAM_TIMEOUT_MS after it asked.

t.test('callers queued behind a slow upstream are answered 504 by their deadline, and the dropped calls are never sent', async (t) => {
  // One slot, 700 ms per call, 1 s of budget: the first is served, the second is cut off when the
  // budget ends (after 300 ms of its own, so not counted against the upstream), the others never leave the queue.
  const timeoutMs = 1_000
  const { app, sim } = await stack(t, { env: { UPSTREAM_MAX_CONCURRENCY: '1', UPSTREAM_TIMEOUT_MS: String(timeoutMs) }, sim: { latencyMs: 700 } })
  await app.tokens.getToken()
  t.equal((await app.inject('/profile/warm')).statusCode, 200, 'token held, connection open')
  const callsBefore = sim.stats.dataCalls

  const started = Date.now()
  const answers = await Promise.all(usernames(6).map(async (name) => {
    const res = await app.inject(`/profile/${name}`)
    return { res, waitedMs: Date.now() - started }
  }))
  t.same(tally(answers.map(({ res }) => res)), { 200: 1, '504 UPSTREAM_TIMEOUT': 5 })
  const longest = Math.max(...answers.map(({ waitedMs }) => waitedMs))
  t.ok(longest < timeoutMs + 250, `every caller answered within the deadline and a margin (longest ${longest} ms)`)
  t.equal(sim.stats.dataCalls - callsBefore, 2, 'the served call and the one cut off; the four others were dropped unsent')
  await eventually(() => sim.stats.abortedResponses === 1, 'the call cut off was aborted at the upstream')
  t.equal(app.upstream.breakerState, 'closed', 'a call the queue left little time is no evidence against the upstream')
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

t.test('a stale entry is still served when the upstream would take longer than the deadline', async (t) => {
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
