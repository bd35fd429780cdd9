import t from 'tap'
import { Clock, metric, parseMetrics, settle, stack } from '../../helper.ts'

// The fleet's upstream budget, wired into the app (issue 25): callers with nothing to serve are refused at their
// deadline rather than sent past the budget; a caller with a stale entry is served at once; an upstream 429 halves it.

const ONE_PER_SECOND = { UPSTREAM_MAX_RPS: '1', UPSTREAM_BURST: '1', UPSTREAM_TIMEOUT_MS: '400' }

t.test('past the budget, callers with nothing to serve get 503 UPSTREAM_BUDGET_EXHAUSTED with Retry-After, and the upstream sees none of them', async (t) => {
  // The clock stands still: on the real one, a busy machine let the first call's 400 ms pass before it was sent.
  const { app, sim } = await stack(t, { env: ONE_PER_SECOND, now: new Clock().now })
  await app.tokens.getToken()
  const answers = await Promise.all(['a', 'b', 'c'].map(async (name) => await app.inject(`/profile/budget-${name}`)))
  const refused = answers.filter((answer) => answer.statusCode === 503)
  t.equal(answers.filter((answer) => answer.statusCode === 200).length, 1, 'the burst of one goes through')
  t.equal(refused.length, 2)
  for (const answer of refused) {
    t.equal(answer.json().code, 'UPSTREAM_BUDGET_EXHAUSTED')
    t.ok(Number(answer.headers['retry-after']) >= 1, 'told when to come back')
  }
  t.equal(sim.stats.dataCalls, 1, 'one call reached the upstream')
  const metrics = parseMetrics((await app.inject('/metrics')).body)
  t.equal(metric(metrics, 'pbff_upstream_budget_dropped_total', { priority: 'caller', reason: 'deadline' }), 2)
  t.equal(metric(metrics, 'pbff_upstream_budget_calls_total', { priority: 'caller' }), 1)
})

t.test('the upstream client gives the budget its caller\'s deadline: one the queue cannot cover is refused at once, never sent', async (t) => {
  const { app, sim } = await stack(t, { env: { UPSTREAM_MAX_RPS: '1', UPSTREAM_BURST: '1' } })
  await app.tokens.getToken()
  t.equal((await app.inject('/profile/takes-the-burst')).statusCode, 200)
  const waiting = new AbortController()
  const ahead = app.upstream.profile('waits', waiting.signal).catch(() => {})
  await settle()
  // One caller queued at 1 call/s: a second to wait, more than the 0.8 s its caller has left (UPSTREAM_TIMEOUT_MS would cover it).
  await t.rejects(app.upstream.profile('due-soon', undefined, 'caller', Date.now() + 800), { code: 'UPSTREAM_BUDGET_EXHAUSTED' })
  const metrics = parseMetrics((await app.inject('/metrics')).body)
  t.equal(metric(metrics, 'pbff_upstream_budget_deferred_total', { priority: 'caller' }), 1, 'refused without queueing: only the call ahead waited')
  t.equal(sim.callsFor('profile', 'due-soon'), 0, 'never sent')
  waiting.abort()
  await ahead
})

t.test('a caller with a stale entry gets it at once, whatever the budget', async (t) => {
  const clock = new Clock()
  // A caller's 5 s: at ONE_PER_SECOND's 400 ms, a busy machine's token exchange could take the first load's time.
  const { app } = await stack(t, { env: { ...ONE_PER_SECOND, UPSTREAM_TIMEOUT_MS: '5000' }, now: clock.now })
  t.equal((await app.inject('/profile/stale-one')).statusCode, 200)
  clock.advance(301_000)
  const cold = app.inject('/profile/someone-else')
  const stale = await app.inject('/profile/stale-one')
  t.equal(stale.statusCode, 200)
  t.equal(stale.headers['x-cache'], 'STALE')
  await cold
})

t.test('an upstream 429 halves the budget, which /readyz and the metrics report', async (t) => {
  // The clock stands still: on the real one, a stall past the Retry-After (1 s) read the budget recovering.
  const { app, sim } = await stack(t, { env: { UPSTREAM_MAX_RPS: '20' }, now: new Clock().now })
  t.equal((await app.inject('/readyz')).json().upstreamBudgetRps, 20)
  sim.failNext({ kind: 'status', status: 429, retryAfter: '1' })
  t.equal((await app.inject('/profile/throttled')).json().code, 'UPSTREAM_RATE_LIMITED')
  t.equal((await app.inject('/readyz')).json().upstreamBudgetRps, 10, 'halved for the fleet')
  const metrics = parseMetrics((await app.inject('/metrics')).body)
  t.equal(metric(metrics, 'pbff_upstream_budget_rps', { scope: 'instance' }), 10)
})

t.test('without UPSTREAM_MAX_RPS the budget is unlimited: /readyz and the metrics name none', async (t) => {
  const { app } = await stack(t)
  await app.inject('/profile/unbudgeted')
  t.notOk('upstreamBudgetRps' in (await app.inject('/readyz')).json())
  const names = new Set(parseMetrics((await app.inject('/metrics')).body).map((sample) => sample.name))
  for (const name of ['pbff_upstream_budget_rps', 'pbff_upstream_budget_fleet_instances']) t.notOk(names.has(name), `no ${name} sample`)
})
