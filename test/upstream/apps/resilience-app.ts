import t from 'tap'
import { profileOf } from '../../../dev/profiles.ts'
import { BREAKER_FAILURE_THRESHOLD } from '../../../src/upstream/circuit-breaker.ts'
import { MAX_RETRY_AFTER_SECONDS } from '../../../src/upstream/retry-after.ts'
import type { FastifyInstance } from 'fastify'
import { anotherApp, Clock, eventually, metric, parseMetrics, profiles, REDIS_URL, stack, tally, untilRedisReady, usernames } from '../../helper.ts'

// The upstream client's protections, through the whole app, counted at the simulator.

/** Whether the app reports a back-off window in force, as an operator reads it. */
async function backingOff (app: FastifyInstance): Promise<boolean> {
  return metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_upstream_backoff_active') === 1
}

/** The circuit breaker's state, as pbff_upstream_breaker_state reports it. */
async function breakerState (app: FastifyInstance): Promise<string | undefined> {
  const metrics = parseMetrics((await app.inject('/metrics')).body)
  return ['closed', 'open', 'half_open'].find((state) => metric(metrics, 'pbff_upstream_breaker_state', { state }) === 1)
}

/** Profile calls that ended at their limit. */
async function timeouts (app: FastifyInstance): Promise<number | undefined> {
  return metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_upstream_calls_total', { resource: 'profile', outcome: 'timeout' })
}

t.test('429 with Retry-After in seconds opens a back-off window: no call until it ends', async (t) => {
  const clock = new Clock()
  const { app, sim } = await stack(t, { now: clock.now })
  sim.failNext({ kind: 'status', status: 429, retryAfter: '1' })
  const first = await app.inject('/profile/a1')
  t.equal(first.statusCode, 503)
  t.match(first.json(), { code: 'UPSTREAM_RATE_LIMITED' })
  t.equal(first.headers['retry-after'], '1')
  t.ok(await backingOff(app), 'pbff_upstream_backoff_active says so')

  const during = await app.inject('/profile/a2')
  t.equal(during.statusCode, 503)
  t.match(during.json(), { code: 'UPSTREAM_RATE_LIMITED' })
  t.equal(during.headers['retry-after'], '1')
  t.equal(during.headers['cache-control'], 'no-store')
  t.equal(sim.stats.dataCalls, 1, 'nothing reached the upstream during the window')

  clock.advance(999)
  t.equal((await app.inject('/profile/a2')).statusCode, 503, 'the window lasts its whole second')
  clock.advance(1)
  t.equal((await app.inject('/profile/a2')).statusCode, 200, 'the window ended')
  t.equal(sim.stats.dataCalls, 2)
})

t.test('pbff_upstream_breaker_state follows the breaker with no call: open, then half open once its second is up', async (t) => {
  const clock = new Clock()
  const { app, sim } = await stack(t, { now: clock.now })
  sim.failAlways({ kind: 'status', status: 500 })
  for (let i = 0; i < BREAKER_FAILURE_THRESHOLD; i++) await app.inject(`/profile/failing-${i}`)
  t.equal(await breakerState(app), 'open')
  clock.advance(1_000)
  t.equal(await breakerState(app), 'half_open', 'an idle instance reports its probe due')
  t.equal((await app.inject('/readyz')).json().breaker, 'half_open', 'as /readyz does')
  t.equal(sim.stats.dataCalls, BREAKER_FAILURE_THRESHOLD, 'no call made meanwhile')
})

// The app's clock is steady (steady-clock.ts): after a step of the host's clock since the start it is apart from the
// wall time an HTTP date is written in, here by an hour either way (moved through performance.now, which it reads).
for (const apartMs of [0, 3_600_000, -3_600_000]) {
  t.test(`429 with Retry-After as an HTTP date is honoured, the app's clock ${apartMs / 1000} s from the wall clock`, async (t) => {
    const perfNow = performance.now.bind(performance)
    performance.now = () => perfNow() + apartMs
    t.teardown(() => { performance.now = perfNow })
    const { app, sim } = await stack(t)
    sim.failNext({ kind: 'status', status: 429, retryAfter: new Date(Date.now() + 20_000).toUTCString() })
    const first = await app.inject('/profile/a1')
    t.equal(first.statusCode, 503)
    const seconds = Number(first.headers['retry-after'])
    // Whole seconds both: the answer's Date may be a second behind the Retry-After's own.
    t.ok(seconds >= 18 && seconds <= 21, `Retry-After ${seconds}`)
    const during = await app.inject('/profile/a2')
    t.match(during.json(), { statusCode: 503, code: 'UPSTREAM_RATE_LIMITED' })
    t.ok(Number(during.headers['retry-after']) <= seconds)
    t.equal(sim.stats.dataCalls, 1)
  })
}

t.test('a Retry-After beyond the cap is capped', async (t) => {
  const { app, sim } = await stack(t)
  sim.failNext({ kind: 'status', status: 429, retryAfter: '86400' })
  const res = await app.inject('/profile/a1')
  t.equal(res.headers['retry-after'], String(MAX_RETRY_AFTER_SECONDS))
})

t.test('503 with Retry-After is a back-off like 429; 503 without it is an upstream error', async (t) => {
  const { app, sim } = await stack(t)
  sim.failNext({ kind: 'status', status: 503 })
  t.match((await app.inject('/profile/a1')).json(), { statusCode: 502, code: 'UPSTREAM_ERROR' })
  sim.failNext({ kind: 'status', status: 503, retryAfter: '9' })
  const res = await app.inject('/profile/a2')
  t.match(res.json(), { statusCode: 503, code: 'UPSTREAM_RATE_LIMITED' })
  t.equal(res.headers['retry-after'], '9')
  t.equal((await app.inject('/profile/a3')).statusCode, 503)
  t.equal(sim.stats.dataCalls, 2)
})

t.test('with Redis, one instance\'s 429 keeps every instance from calling', async (t) => {
  const { app, sim, config } = await stack(t, { env: { REDIS_URL } })
  const other = await anotherApp(t, config)
  await Promise.all([untilRedisReady(app), untilRedisReady(other)])
  sim.failNext({ kind: 'status', status: 429, retryAfter: '30' })
  t.equal((await app.inject('/profile/a1')).statusCode, 503)
  const res = await other.inject('/profile/b1')
  t.match(res.json(), { statusCode: 503, code: 'UPSTREAM_RATE_LIMITED' })
  t.ok(Number(res.headers['retry-after']) > 25)
  t.equal(sim.stats.dataCalls, 1)
})

t.test('during a back-off window a stale entry is served and not revalidated upstream', async (t) => {
  const failedRevalidations: string[] = []
  const logger = { level: 'warn', stream: { write: (line: string) => { if (line.includes('background revalidation failed')) failedRevalidations.push(line) } } }
  const clock = new Clock()
  const { app, sim } = await stack(t, { env: { PROFILE_TTL_SECONDS: '1' }, logger, now: clock.now })
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  clock.advance(1_000)
  sim.failAlways({ kind: 'status', status: 429, retryAfter: '30' })
  const stale = await app.inject('/profile/alice')
  t.equal(stale.statusCode, 200)
  t.same(stale.json(), { user: profileOf('alice') })
  await eventually(async () => await backingOff(app), 'the revalidation met the 429')
  await eventually(() => failedRevalidations.length === 1, 'the first revalidation failed')
  const again = await app.inject('/profile/alice')
  t.equal(again.statusCode, 200)
  await app.cacheLoads.settled(10_000)
  t.equal(failedRevalidations.length, 1, 'within a freshness of the failure, no revalidation starts (the failure holds it)')
  // Past the hold, still within the window: the next revalidation starts, and the window refuses it.
  clock.advance(1_000)
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  await eventually(() => failedRevalidations.length === 2, 'the second revalidation was refused')
  t.match(failedRevalidations[1], /UPSTREAM_RATE_LIMITED/)
  t.equal(sim.callsFor('profile', 'alice'), 2, 'no revalidation reached the upstream during the window')
})

t.test('repeated 5xx open the circuit: calls stop, and are refused at once', async (t) => {
  const { app, sim } = await stack(t)
  sim.failAlways({ kind: 'status', status: 500 })
  const failures = await profiles(app, usernames(BREAKER_FAILURE_THRESHOLD))
  t.same(tally(failures), { '502 UPSTREAM_ERROR': BREAKER_FAILURE_THRESHOLD })
  t.equal(app.upstream.breakerState, 'open')
  const refused = await profiles(app, usernames(10, 'later'))
  t.same(tally(refused), { '502 UPSTREAM_ERROR': 10 })
  t.match(refused[0]?.json(), { message: /paused after repeated failures/ })
  t.equal(sim.stats.dataCalls, BREAKER_FAILURE_THRESHOLD, 'no call while open')
})

t.test('repeated timeouts open the circuit once the sent calls end: later callers are refused at once, with no call', async (t) => {
  const clock = new Clock()
  const { app, sim, config } = await stack(t, { now: clock.now, env: { UPSTREAM_TIMEOUT_MS: '1000' } })
  // The token first: a slow exchange could take the callers' real 0.9 s before their calls are sent.
  await app.tokens.getToken()
  sim.failAlways({ kind: 'hang' })
  const timedOut = profiles(app, usernames(BREAKER_FAILURE_THRESHOLD))
  await eventually(() => sim.stats.dataCalls === BREAKER_FAILURE_THRESHOLD, 'every call is sent')
  // The calls' own limit passes on the app's clock too: each has had its whole time, so its timeout is the upstream's.
  clock.advance(config.UPSTREAM_TIMEOUT_MS)
  t.same(tally(await timedOut), { '504 UPSTREAM_TIMEOUT': BREAKER_FAILURE_THRESHOLD }, 'each caller has its 504 at its own deadline')
  // Their callers gone, the sent calls run to their own limit, and only then tell the breaker.
  await eventually(async () => await breakerState(app) === 'open', 'the timeouts of calls nobody waits for any more opened the circuit')
  t.equal(await timeouts(app), BREAKER_FAILURE_THRESHOLD, 'each sent call ended at its own limit')
  t.same(tally(await profiles(app, ['later'])), { '502 UPSTREAM_ERROR': 1 })
  t.equal(sim.stats.dataCalls, BREAKER_FAILURE_THRESHOLD, 'refused without an upstream call')
})

t.test('a refused connection answers 502 UPSTREAM_ERROR, and repeated ones open the circuit', async (t) => {
  const { app } = await stack(t, { env: { UPSTREAM_BASE_URL: 'http://127.0.0.1:1' }, sim: { audience: 'http://127.0.0.1:1' } })
  const failures = await profiles(app, usernames(BREAKER_FAILURE_THRESHOLD))
  t.same(tally(failures), { '502 UPSTREAM_ERROR': BREAKER_FAILURE_THRESHOLD })
  t.match(failures[0]?.json(), { message: 'The profile service failed: it could not be reached' })
  t.equal(app.upstream.breakerState, 'open')
})

t.test('invalid answers do not open the circuit and are never cached', async (t) => {
  const { app, sim } = await stack(t)
  sim.failNext({ kind: 'wrong-shape' }, BREAKER_FAILURE_THRESHOLD)
  for (let i = 0; i < BREAKER_FAILURE_THRESHOLD; i++) {
    t.match((await app.inject('/profile/alice')).json(), { statusCode: 502, code: 'UPSTREAM_INVALID_RESPONSE' })
  }
  t.equal(app.upstream.breakerState, 'closed')
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  t.equal(sim.callsFor('profile', 'alice'), BREAKER_FAILURE_THRESHOLD + 1, 'every failure called again: nothing was cached')
})

t.test('a dropped connection is retried once; a 5xx never is', async (t) => {
  const { app, sim } = await stack(t)
  sim.failNext({ kind: 'reset' })
  t.equal((await app.inject('/profile/a1')).statusCode, 200)
  t.equal(sim.callsFor('profile', 'a1'), 2)

  sim.failNext({ kind: 'reset' }, 2)
  t.match((await app.inject('/profile/a2')).json(), { statusCode: 502, code: 'UPSTREAM_ERROR' })
  t.equal(sim.callsFor('profile', 'a2'), 2, 'only once')

  sim.failNext({ kind: 'status', status: 500 })
  t.match((await app.inject('/profile/a3')).json(), { statusCode: 502, code: 'UPSTREAM_ERROR' })
  t.equal(sim.callsFor('profile', 'a3'), 1)
})

t.test('UPSTREAM_TIMEOUT_MS covers the body: a trickling answer is aborted with 504', async (t) => {
  // 1 s, the token held first: at 300 ms a busy machine's exchange could take the caller's time, the call never sent.
  const { app, sim } = await stack(t, { env: { UPSTREAM_TIMEOUT_MS: '1000' } })
  await app.tokens.getToken()
  sim.failNext({ kind: 'trickle' })
  const res = await app.inject('/profile/alice')
  t.same(res.json(), { statusCode: 504, code: 'UPSTREAM_TIMEOUT', error: 'Gateway Timeout', message: 'The profile service did not answer within 1000 ms' })
  await eventually(() => sim.stats.abortedResponses === 1, 'the upstream saw the request aborted')
  t.equal(sim.callsFor('profile', 'alice'), 1, 'a timeout is not retried')
})

t.test('requests beyond the concurrency wait in a bounded queue; a full queue answers 503', async (t) => {
  // One slot and eight places: of 12 simultaneous lookups, 9 are served, 3 refused.
  const { app, sim } = await stack(t, { env: { UPSTREAM_MAX_CONCURRENCY: '1' }, sim: { latencyMs: 100 } })
  const responses = await profiles(app, usernames(12))
  t.same(tally(responses), { 200: 9, '503 UPSTREAM_OVERLOADED': 3 })
  t.same(responses.filter((res) => res.statusCode === 503).map((res) => res.headers['retry-after']), ['1', '1', '1'],
    'told to come back after what the upstream has been taking (100 ms), in whole seconds')
  t.equal(sim.stats.dataCalls, 9)
  t.equal((await app.inject('/profile/afterwards')).statusCode, 200, 'the queue drained')
})
