import t, { type Test } from 'tap'
import { Pool } from 'undici'
import { BackoffWindow } from '../../../src/upstream/backoff-window.ts'
import { BREAKER_FAILURE_THRESHOLD, BREAKER_OPEN_MS, CircuitBreaker } from '../../../src/upstream/circuit-breaker.ts'
import { ConcurrencyLimiter } from '../../../src/upstream/concurrency-limiter.ts'
import { originConnection } from '../../../src/upstream/origin-pool.ts'
import { TokenEndpoint } from '../../../src/upstream/token-endpoint.ts'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import { RecentLatency } from '../../../src/upstream/recent-latency.ts'
import { UpstreamClient } from '../../../src/upstream/upstream-client.ts'
import { createUpstreamBudget } from '../../../src/upstream/budget/upstream-budget.ts'
import { loadConfig } from '../../../src/config.ts'
import { nobodyWaits } from '../../../src/cancellation.ts'
import { profileOf } from '../../../dev/profiles.ts'
import { Clock, eventually, recordingLog, recordingTelemetry, simulator, type TestContext } from '../../helper.ts'

/** The configuration the fleet's budget reads: UPSTREAM_MAX_RPS and its siblings. */
function budgetConfig (upstream: string, maxRps: string) {
  return loadConfig({ UPSTREAM_BASE_URL: upstream, AUTH_URL: upstream, CLIENT_ID: 'c', CLIENT_SECRET: 's', UPSTREAM_MAX_RPS: maxRps })
}

// The client as a class, with its collaborators in reach: a real simulator, a clock moved by hand.
async function client (t: TestContext) {
  const sim = await simulator(t)
  const pool = new Pool(sim.url)
  t.teardown(() => pool.close())
  const clock = new Clock(Date.now())
  const telemetry = recordingTelemetry()
  const log = recordingLog()
  const tokens = new TokenManager({
    endpoint: new TokenEndpoint({
      connection: () => originConnection(sim.url, 1_000),
      tokenPath: '/oauth/token',
      clientId: sim.options.clientId,
      clientSecret: sim.options.clientSecret,
      audience: sim.options.audience,
      defaultTtlSeconds: 3600,
      timeoutMs: 1_000
    }),
    telemetry,
    log,
    lockWaitMs: 1_000
  })
  const upstream = new UpstreamClient({
    dispatcher: pool,
    basePath: '',
    tokens,
    authScheme: 'Bearer',
    callerMs: 1_000,
    limiter: new ConcurrencyLimiter({ concurrency: 4 }),
    latency: new RecentLatency(),
    breaker: new CircuitBreaker({ telemetry, now: clock.now }),
    backoff: new BackoffWindow({ telemetry, now: clock.now }),
    budget: createUpstreamBudget({ config: budgetConfig(sim.baseUrl, '0'), now: clock.now, telemetry, onError: () => {} }),
    telemetry,
    log,
    now: clock.now
  })
  return { sim, upstream, clock, telemetry, log }
}

/** Calls that fail until the circuit opens. */
async function openCircuit (t: Test, upstream: UpstreamClient): Promise<void> {
  for (let i = 0; i < BREAKER_FAILURE_THRESHOLD; i++) await t.rejects(upstream.profile(`a${i}`))
}

t.test('each call is reported with its outcome; each failure logged once as a warning, without the token', async (t) => {
  const { sim, upstream, telemetry, log } = await client(t)
  t.same(await upstream.profile('alice'), { found: true, body: { user: profileOf('alice') } })
  t.same(await upstream.timeline('ghost-1'), { found: false })
  sim.failNext({ kind: 'status', status: 500 })
  await t.rejects(upstream.profile('bob'), { code: 'UPSTREAM_ERROR' })
  t.same(telemetry.events.filter((event) => event.startsWith('call:')), ['call:profile:ok', 'call:timeline:not_found', 'call:profile:error'])
  const warnings = log.lines.filter((line) => line.includes('"level":"warn"'))
  t.equal(warnings.length, 1)
  t.match(JSON.parse(warnings[0] ?? '{}'), { message: 'upstream call failed', resource: 'profile', outcome: 'error' })
  t.notMatch(log.lines.join('\n'), 'sim_')
})

t.test('an open circuit lets one probe through after its period; success closes it', async (t) => {
  const { sim, upstream, clock, telemetry } = await client(t)
  sim.failAlways({ kind: 'status', status: 502 })
  t.equal(upstream.wouldRefuse('caller', clock.now() + 1_000), false, 'closed: a caller would not be refused')
  await openCircuit(t, upstream)
  t.equal(upstream.breakerState, 'open')
  t.equal(upstream.wouldRefuse('caller', clock.now() + 1_000), true, 'open: a caller would be refused (asked without counting it)')
  await t.rejects(upstream.profile('refused'), { code: 'UPSTREAM_ERROR', message: /next try within 1 s/ })
  t.equal(sim.stats.dataCalls, BREAKER_FAILURE_THRESHOLD)

  clock.advance(BREAKER_OPEN_MS)
  t.equal(upstream.breakerState, 'half_open')
  await t.rejects(upstream.profile('probe-1'), { code: 'UPSTREAM_ERROR', message: 'The profile service failed: status 502' })
  t.equal(upstream.breakerState, 'open', 'a failed probe opens it again')
  t.equal(sim.stats.dataCalls, BREAKER_FAILURE_THRESHOLD + 1)

  clock.advance(BREAKER_OPEN_MS)
  sim.failAlways(undefined)
  const [probe, beside] = await Promise.allSettled([upstream.profile('probe-2'), upstream.profile('beside')])
  t.equal(probe.status, 'fulfilled')
  t.match(beside, { status: 'rejected', reason: { code: 'UPSTREAM_ERROR' } }, 'only one probe at a time')
  t.equal(upstream.breakerState, 'closed')
  t.equal(sim.stats.dataCalls, BREAKER_FAILURE_THRESHOLD + 2)
  t.match(telemetry.events.filter((event) => event.startsWith('breaker:')), ['breaker:open', 'breaker:half_open', 'breaker:open', 'breaker:half_open', 'breaker:closed'])
})

t.test('the back-off window refuses calls until it ends, then calls resume', async (t) => {
  const { sim, upstream, clock, telemetry } = await client(t)
  sim.failNext({ kind: 'status', status: 429, retryAfter: '30' })
  await t.rejects(upstream.profile('a1'), { code: 'UPSTREAM_RATE_LIMITED', retryAfterSeconds: 30 })
  t.equal(upstream.wouldRefuse('caller', clock.now() + 1_000), true, 'a caller would be refused during the back-off (asked without counting it)')
  clock.advance(29_500)
  await t.rejects(upstream.profile('a2'), { code: 'UPSTREAM_RATE_LIMITED', retryAfterSeconds: 1 })
  t.equal(sim.stats.dataCalls, 1)
  clock.advance(500)
  t.equal(upstream.wouldRefuse('caller', clock.now() + 1_000), false, 'nor once it ended')
  t.match(await upstream.profile('a3'), { found: true })
  t.same(telemetry.events.filter((event) => /^(call|backoff):/.test(event)), [
    'backoff:true', 'call:profile:rate_limited', 'call:profile:short_circuited', 'backoff:false', 'call:profile:ok'
  ])
})

t.test('a call its callers leave once it is sent runs to its answer: reported once, and the breaker learns from it', async (t) => {
  const { sim, upstream, clock, telemetry, log } = await client(t)
  sim.failAlways({ kind: 'status', status: 502 })
  await openCircuit(t, upstream)
  clock.advance(BREAKER_OPEN_MS)
  t.equal(upstream.breakerState, 'half_open')

  sim.failAlways(undefined)
  sim.options.latencyMs = 200
  const cancel = new AbortController()
  const probe = upstream.profile('probe', cancel.signal)
  await eventually(() => sim.callsFor('profile', 'probe') === 1, 'the probe is at the upstream')
  cancel.abort(nobodyWaits('every caller left'))
  t.match(await probe, { found: true }, 'its answer, for the cache')
  t.equal(sim.stats.abortedResponses, 0, 'never aborted at the upstream')
  t.equal(upstream.breakerState, 'closed', 'a good probe closes the circuit')
  t.same(telemetry.events.filter((event) => event.startsWith('call:')), [...Array<string>(BREAKER_FAILURE_THRESHOLD).fill('call:profile:error'), 'call:profile:ok'])
  t.equal(log.lines.filter((line) => line.includes('"level":"warn"')).length, BREAKER_FAILURE_THRESHOLD, 'the failures only')
})
