import { performance } from 'node:perf_hooks'
import t from 'tap'
import { Clock, metric, parseMetrics, stack, stallMeter, tally, usernames } from '../../helper.ts'

// A short UPSTREAM_TIMEOUT_MS with a fast upstream: its callers still queue for a slot and are sent. Here rather than
// beside the other deadline tests, which run side by side: another app's start-up there holds the event loop for longer
// than these callers' real time (99 ms at 110).

for (const timeoutMs of [110, 200, 1_000]) {
  t.test(`UPSTREAM_TIMEOUT_MS=${timeoutMs}: calls queued for the only slot of a fast upstream are sent and answered`, async (t) => {
    // The app's clock stands still: only the least time a call is expected to take can keep a queued one unsent (with
    // 100 ms whatever the timeout, at 110 ms every queued call was refused at once). The upstream answers at once.
    const clock = new Clock(Date.now())
    const { app, sim } = await stack(t, { now: clock.now, env: { UPSTREAM_MAX_CONCURRENCY: '1', UPSTREAM_TIMEOUT_MS: String(timeoutMs) } })
    await app.tokens.getToken()
    t.equal((await app.inject('/profile/warm-up')).statusCode, 200)
    // The callers' waits run on real timers: a busy machine that holds this process still for long enough ends them.
    const meter = stallMeter()
    const started = performance.now()
    const answers = await Promise.all(usernames(4).map(async (name) => {
      const answer = await app.inject(`/profile/${name}`)
      return { answer, ms: performance.now() - started }
    }))
    const stalledMs = meter.stop()
    const early = answers.filter(({ answer, ms }) => answer.statusCode !== 200 && ms < timeoutMs / 2)
    t.same(early.map(({ answer }) => answer.statusCode), [], 'no caller refused before half its time, whatever the machine')
    if (stalledMs >= timeoutMs / 2) {
      t.comment(`this process stood still ${stalledMs.toFixed(0)} ms of the callers' ${timeoutMs}: their waits may end unsent`)
      return
    }
    t.same(tally(answers.map(({ answer }) => answer)), { 200: 4 })
    t.same(usernames(4).map((name) => sim.callsFor('profile', name)), [1, 1, 1, 1], 'each sent once')
    t.equal(metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_upstream_calls_total', { resource: 'profile', outcome: 'short_circuited' }) ?? 0, 0)
  })
}
