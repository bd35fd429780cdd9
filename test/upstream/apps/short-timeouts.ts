import t from 'tap'
import { Clock, metric, parseMetrics, stack, tally, usernames } from '../../helper.ts'

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
    const answers = await Promise.all(usernames(4).map(async (name) => await app.inject(`/profile/${name}`)))
    t.same(tally(answers), { 200: 4 })
    t.same(usernames(4).map((name) => sim.callsFor('profile', name)), [1, 1, 1, 1], 'each sent once')
    t.equal(metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_upstream_calls_total', { resource: 'profile', outcome: 'short_circuited' }) ?? 0, 0)
  })
}
