import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { PrometheusTelemetry } from '../../../src/telemetry/prometheus-telemetry.ts'
import { eventually, metric, parseMetrics, RedisServer, type Sample, stack } from '../../helper.ts'

async function scrape (app: FastifyInstance): Promise<Sample[]> {
  const res = await app.inject('/metrics')
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}`)
  return parseMetrics(res.body)
}

t.test('/metrics is Prometheus text, not cached, with Node\'s process metrics', async (t) => {
  const { app } = await stack(t)
  const res = await app.inject('/metrics')
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  t.equal(res.headers['cache-control'], 'no-store')
  const samples = parseMetrics(res.body)
  for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes',
    'nodejs_eventloop_lag_seconds', 'nodejs_active_handles_total']) {
    t.ok(samples.some((sample) => sample.name === name), name)
  }
  t.equal(metric(samples, 'pbff_token_exchanges_total', { outcome: 'minted' }), 0, 'alerting series exist from the start')
  t.equal(metric(samples, 'pbff_upstream_breaker_state', { state: 'closed' }), 1)
  t.equal(metric(samples, 'pbff_upstream_backoff_active'), 0)
})

t.test('known traffic gives known numbers: requests, cache lookups, upstream calls, tokens, coalescing, breaker', async (t) => {
  const { app, sim } = await stack(t)
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'MISS')
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'HIT')
  t.equal((await app.inject('/user/alice?query=name')).headers['x-cache'], 'HIT')
  t.equal((await app.inject('/profiles?username=alice&username=bob')).headers['x-cache'], 'MISS', 'a batch: alice held, bob loaded')
  t.equal((await app.inject('/profile/ghost-1')).statusCode, 404)
  // Ten callers at once for one cold timeline: one upstream call, nine waiters.
  const timeline = await Promise.all(Array.from({ length: 10 }, () => app.inject('/profile/carol/timeline')))
  t.same(timeline.map((res) => res.statusCode), Array(10).fill(200))
  // Five failures in a row open the breaker; the sixth lookup is refused without a call.
  sim.failNext({ kind: 'status', status: 500 }, 5)
  for (let i = 1; i <= 6; i++) t.equal((await app.inject(`/profile/failing-${i}`)).statusCode, 502)
  t.equal((await app.inject('/nowhere')).statusCode, 404)
  t.equal((await app.inject('/nowhere/else')).statusCode, 404)
  t.equal(sim.stats.dataCalls, 9, 'alice, bob, ghost-1, carol\'s timeline and five failures reached the upstream')

  const samples = await scrape(app)
  const requests = (route: string, status: string) => metric(samples, 'pbff_http_requests_total', { method: 'GET', route, status })
  t.equal(requests('/profile/:username', '200'), 2)
  t.equal(requests('/profile/:username', '404'), 1)
  t.equal(requests('/profile/:username', '502'), 6)
  t.equal(requests('/user/:username', '200'), 1)
  t.equal(requests('/profiles', '200'), 1)
  t.equal(requests('/profile/:username/timeline', '200'), 10)
  t.equal(requests('unmatched', '404'), 2, 'unknown URLs share one series')
  t.equal(metric(samples, 'pbff_http_request_duration_seconds_count', { route: '/profile/:username' }), 9)
  t.equal(metric(samples, 'pbff_http_request_duration_seconds_bucket', { route: '/profile/:username', le: '+Inf' }), 9)

  const lookups = (resource: string, state: string) => metric(samples, 'pbff_cache_lookups_total', { resource, state })
  t.equal(lookups('profile', 'HIT'), 3, 'alice again, the field query (a profile lookup) and alice in the batch')
  t.equal(lookups('profile', 'MISS'), 3, 'alice, bob in the batch and ghost-1; the failures served nothing')
  t.equal(lookups('timeline', 'MISS'), 10, 'every waiter of the coalesced load')

  const upstream = (resource: string, outcome: string) => metric(samples, 'pbff_upstream_calls_total', { resource, outcome })
  t.equal(upstream('profile', 'ok'), 2)
  t.equal(upstream('profile', 'not_found'), 1)
  t.equal(upstream('timeline', 'ok'), 1)
  t.equal(upstream('profile', 'error'), 5)
  t.equal(upstream('profile', 'short_circuited'), 1)
  t.equal(metric(samples, 'pbff_upstream_call_duration_seconds_count', { resource: 'profile' }), 8, 'calls made, not the refused one')
  t.equal(metric(samples, 'pbff_upstream_call_duration_seconds_count', { resource: 'timeline' }), 1)

  t.equal(metric(samples, 'pbff_token_exchanges_total', { outcome: 'minted' }), sim.stats.tokensIssued)
  t.equal(metric(samples, 'pbff_token_exchanges_total', { outcome: 'minted' }), 1)
  t.equal(metric(samples, 'pbff_coalesced_waiters_total', { resource: 'timeline' }), 9)
  t.equal(metric(samples, 'pbff_upstream_breaker_state', { state: 'open' }), 1)
  t.equal(metric(samples, 'pbff_upstream_breaker_state', { state: 'closed' }), 0)
  t.equal(metric(samples, 'pbff_upstream_breaker_openings_total'), 1)
})

t.test('a 429 from the upstream opens a back-off window, counted once and shown while it lasts', async (t) => {
  const { app, sim } = await stack(t)
  sim.failNext({ kind: 'status', status: 429, retryAfter: '30' })
  t.equal((await app.inject('/profile/alice')).statusCode, 503)
  t.equal((await app.inject('/profile/bob')).statusCode, 503, 'still in the window')
  t.equal(sim.stats.dataCalls, 1, 'the window kept the second lookup from the upstream')
  const samples = await scrape(app)
  t.equal(metric(samples, 'pbff_upstream_backoff_active'), 1)
  t.equal(metric(samples, 'pbff_upstream_backoff_windows_total'), 1)
  t.equal(metric(samples, 'pbff_upstream_calls_total', { resource: 'profile', outcome: 'rate_limited' }), 1)
})

t.test('the upstream calls in flight and queued are read at each scrape', async (t) => {
  const { app, sim } = await stack(t, { env: { UPSTREAM_MAX_CONCURRENCY: '1', UPSTREAM_TIMEOUT_MS: '30000' }, sim: { latencyMs: 500 } })
  await app.tokens.getToken()
  const held = async () => {
    const samples = await scrape(app)
    return [metric(samples, 'pbff_upstream_calls_in_flight'), metric(samples, 'pbff_upstream_calls_queued')]
  }
  t.same(await held(), [0, 0], 'both at zero before any call')
  const answers = Promise.all(['a1', 'a2', 'a3'].map(async (username) => await app.inject(`/profile/${username}`)))
  await eventually(async () => (await held())[1] === 2, 'two calls wait behind the one slot')
  t.same(await held(), [1, 2])
  t.same((await answers).map((res) => res.statusCode), [200, 200, 200])
  t.same(await held(), [0, 0], 'every slot given back')
  t.equal(sim.stats.dataCalls, 3)
})

t.test('a failed token exchange counts as failed, and mints nothing', async (t) => {
  const { app, sim } = await stack(t)
  sim.failTokenNext({ kind: 'status', status: 500 })
  const res = await app.inject('/profile/alice')
  t.equal(res.statusCode, 502)
  t.equal(res.json().code, 'UPSTREAM_AUTH_FAILED')
  const samples = await scrape(app)
  t.equal(metric(samples, 'pbff_token_exchanges_total', { outcome: 'failed' }), 1)
  t.equal(metric(samples, 'pbff_token_exchanges_total', { outcome: 'minted' }), 0)
})

t.test('apps side by side count only their own traffic', async (t) => {
  const one = (await stack(t)).app
  const two = (await stack(t)).app
  await one.inject('/profile/alice')
  t.equal(metric(await scrape(one), 'pbff_http_requests_total', { route: '/profile/:username', status: '200' }), 1)
  t.equal(metric(await scrape(two), 'pbff_http_requests_total', { route: '/profile/:username', status: '200' }), undefined)
  t.equal(metric(await scrape(two), 'pbff_token_exchanges_total', { outcome: 'minted' }), 0)
})

t.test('windows and openings count transitions, not repeated reports', async (t) => {
  const telemetry = new PrometheusTelemetry()
  for (const active of [true, true, false, true]) telemetry.backoff(active)
  for (const state of ['open', 'open', 'half_open', 'open', 'closed'] as const) telemetry.breaker(state)
  const samples = parseMetrics(await telemetry.render())
  t.equal(metric(samples, 'pbff_upstream_backoff_windows_total'), 2)
  t.equal(metric(samples, 'pbff_upstream_backoff_active'), 1)
  t.equal(metric(samples, 'pbff_upstream_breaker_openings_total'), 2)
  t.same(['closed', 'open', 'half_open'].map((state) => metric(samples, 'pbff_upstream_breaker_state', { state })), [1, 0, 0])
})

t.test('counts are cumulative from scrape to scrape: none lost, none counted twice', async (t) => {
  const telemetry = new PrometheusTelemetry()
  const hit = { method: 'GET', route: '/profile/:username', status: 200, seconds: 0.0004 }
  const counts = async () => {
    const samples = parseMetrics(await telemetry.render())
    return [
      metric(samples, 'pbff_http_requests_total', { route: '/profile/:username', status: '200' }),
      metric(samples, 'pbff_http_request_duration_seconds_count', { route: '/profile/:username' }),
      metric(samples, 'pbff_http_request_duration_seconds_bucket', { route: '/profile/:username', le: '0.0005' }),
      metric(samples, 'pbff_cache_lookups_total', { resource: 'profile', state: 'HIT' }),
      metric(samples, 'pbff_http_requests_total', { route: 'unmatched', status: '404' })
    ]
  }
  for (let i = 0; i < 3; i++) {
    telemetry.observeRequest(hit)
    telemetry.cacheResult('profile', 'HIT')
  }
  t.same(await counts(), [3, 3, 3, 3, undefined])
  t.same(await counts(), [3, 3, 3, 3, undefined], 'a second scrape adds nothing')
  telemetry.observeRequest({ ...hit, seconds: 0.002 })
  telemetry.observeRequest({ method: 'GET', route: 'unmatched', status: 404, seconds: 0.0002 })
  t.same(await counts(), [4, 4, 3, 3, 1], 'the slower answer lands above the 0.5 ms bucket')
})

t.test('pbff_redis_up: no sample without Redis, 1 while Redis is connected, 0 once it is gone', async (t) => {
  t.equal(metric(await scrape((await stack(t)).app), 'pbff_redis_up'), undefined, 'REDIS_URL unset: nothing to alert on')
  const redis = await RedisServer.start(t)
  const { app } = await stack(t, { env: { REDIS_URL: redis.url } })
  await eventually(async () => metric(await scrape(app), 'pbff_redis_up') === 1, 'a scrape reports Redis up')
  await redis.stop()
  await eventually(async () => metric(await scrape(app), 'pbff_redis_up') === 0, 'a scrape reports Redis down')
})
