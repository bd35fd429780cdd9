import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { Agent, request } from 'undici'
import { cacheStack, capturedLogger, Clock, eventually, metric, parseMetrics, stack, type LogLine, type TestContext } from '../helper.ts'

// A load nobody waits for any more is cancelled, unless it is a background revalidation (issue 11).
// Callers are real HTTP clients that close their connection; the upstream would answer far later.

/** Long enough that no deadline, only a caller leaving, can end a call during a test. */
const PATIENT = { UPSTREAM_TIMEOUT_MS: '30000' }

interface Caller {
  /** Closes the connection before the answer. */
  leave: () => void
  answer: Promise<{ status: number, body: string }>
}

/** The app on a port of its own, and callers of it over real connections, each of which may walk away. */
async function callers (t: TestContext, app: FastifyInstance): Promise<(path: string) => Caller> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  // Connections of the test's own, destroyed before the app closes (undici reconnects after an abort).
  const agent = new Agent()
  t.teardown(() => agent.destroy())
  return (path) => {
    const controller = new AbortController()
    const answer = request(`http://127.0.0.1:${port}${path}`, { signal: controller.signal, dispatcher: agent })
      .then(async ({ statusCode, body }) => ({ status: statusCode, body: await body.text() }))
    // A caller that left is answered by nobody.
    answer.catch(() => {})
    return { leave: () => controller.abort(), answer }
  }
}

/** Requests the app has received so far (their handling up to the upstream's queue takes no I/O: done within the same turn). */
function received (app: FastifyInstance): () => number {
  let count = 0
  app.server.on('request', () => { count++ })
  return () => count
}

/** What operators would read about callers leaving: nothing above info, one line per caller. */
function logged (lines: LogLine[]): { alarming: string[], left: number } {
  return {
    alarming: lines.filter((line) => line.level >= 40).map((line) => line.msg),
    left: lines.filter((line) => line.msg === 'the caller went away before its answer').length
  }
}

/** One sample of the app's metrics, as scraped now. */
async function scraped (app: FastifyInstance, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  return metric(parseMetrics((await app.inject('/metrics')).body), name, labels)
}

async function upstreamCalls (app: FastifyInstance, outcome: string): Promise<number | undefined> {
  return await scraped(app, 'pbff_upstream_calls_total', { resource: 'profile', outcome })
}

async function coalesced (app: FastifyInstance): Promise<number | undefined> {
  return await scraped(app, 'pbff_coalesced_waiters_total', { resource: 'profile' })
}

t.test('a caller that leaves cancels its upstream call: the slot frees, and the breaker learns nothing from it', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app, sim } = await stack(t, { logger, env: { ...PATIENT, UPSTREAM_MAX_CONCURRENCY: '1' } })
  await app.tokens.getToken()
  const caller = await callers(t, app)
  // More than the breaker's threshold of failures in a row (5), were they counted as failures.
  for (let i = 1; i <= 6; i++) {
    sim.failNext({ kind: 'hang' })
    const { leave } = caller(`/profile/cold-${i}`)
    await eventually(() => sim.callsFor('profile', `cold-${i}`) === 1, `the call for cold-${i} is at the upstream`)
    leave()
    await eventually(() => sim.stats.abortedResponses === i, `the call for cold-${i} is aborted at the upstream`)
  }
  const next = await app.inject('/profile/next')
  t.equal(next.statusCode, 200, 'the only slot is free again')
  t.equal(app.upstream.breakerState, 'closed')
  t.equal(await upstreamCalls(app, 'cancelled'), 6, 'reported as cancelled')
  t.equal(await upstreamCalls(app, 'error'), undefined, 'not as errors')
  const latencies = await scraped(app, 'pbff_upstream_call_duration_seconds_count', { resource: 'profile' })
  t.equal(latencies, 1, 'nor as upstream latencies: only the call answered')
  t.equal(sim.stats.dataCalls, 7)
  t.same(logged(lines), { alarming: [], left: 6 }, 'no warning: neither the upstream nor the caller did anything wrong')
})

t.test('a queued call whose caller leaves leaves the queue and never reaches the upstream', async (t) => {
  const { app, sim } = await stack(t, { env: { ...PATIENT, UPSTREAM_MAX_CONCURRENCY: '1' } })
  await app.tokens.getToken()
  const caller = await callers(t, app)
  const requests = received(app)
  sim.failNext({ kind: 'hang' })
  const holder = caller('/profile/holder')
  await eventually(() => sim.callsFor('profile', 'holder') === 1, 'the holder has the only slot')
  const queued = caller('/profile/queued')
  await eventually(() => requests() === 2, 'the second caller is queued behind it')
  queued.leave()
  await eventually(async () => await upstreamCalls(app, 'short_circuited') === 1, 'the queued call is dropped')
  holder.leave()
  await eventually(() => sim.stats.abortedResponses === 1, 'the holder\'s call is aborted, its slot free')
  t.equal((await app.inject('/profile/next')).statusCode, 200, 'the slot went to the next caller')
  t.equal(sim.callsFor('profile', 'queued'), 0, 'the call whose caller left was never sent')
  t.equal(app.upstream.breakerState, 'closed')
})

t.test('two callers of one cold username: the first to leave cancels nothing, the last one does', async (t) => {
  const { app, sim } = await stack(t, { env: PATIENT, sim: { latencyMs: 1_000 } })
  await app.tokens.getToken()
  const caller = await callers(t, app)

  const first = caller('/profile/shared')
  await eventually(() => sim.callsFor('profile', 'shared') === 1, 'the first caller\'s load is at the upstream')
  const second = caller('/profile/shared')
  await eventually(async () => await coalesced(app) === 1, 'the second caller waits for the same load')
  first.leave()
  const { status, body } = await second.answer
  t.equal(status, 200, 'the load went on for the caller still waiting')
  t.match(JSON.parse(body), { user: { name: String } })
  t.equal(sim.stats.abortedResponses, 0)
  t.equal((await app.inject('/profile/shared')).headers['x-cache'], 'HIT', 'and was stored')

  sim.failAlways({ kind: 'hang' })
  const pair = [caller('/profile/pair'), caller('/profile/pair')]
  await eventually(async () => await coalesced(app) === 2 && sim.callsFor('profile', 'pair') === 1, 'both wait for one load')
  for (const each of pair) each.leave()
  await eventually(() => sim.stats.abortedResponses === 1, 'the last to leave cancels the load')
  sim.failAlways(undefined)
  t.equal((await app.inject('/profile/pair')).headers['x-cache'], 'MISS', 'a cancelled load stores nothing: the next caller loads again')
  t.equal(sim.callsFor('profile', 'pair'), 2)
})

t.test('a background revalidation runs to its end, even when a caller that joined it leaves', async (t) => {
  const clock = new Clock(Date.now())
  const { logger, lines } = capturedLogger()
  const { app, sim } = await stack(t, { logger, now: clock.now, env: { ...PATIENT, PROFILE_TTL_SECONDS: '60', STALE_TTL_SECONDS: '60' } })
  const caller = await callers(t, app)
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  clock.advance(61_000)
  sim.options.latencyMs = 1_000
  const stale = await app.inject('/profile/alice')
  t.equal(stale.headers['x-cache'], 'STALE', 'the caller that triggered the revalidation has its answer at once')
  await eventually(() => sim.callsFor('profile', 'alice') === 2, 'the revalidation is at the upstream')
  clock.advance(60_000) // the stale entry is no longer servable: the next caller waits for the revalidation
  const joiner = caller('/profile/alice')
  await eventually(async () => await coalesced(app) === 1, 'a caller joins the revalidation')
  joiner.leave()
  // Only then ask again: a caller asking meanwhile would join the revalidation and keep it going anyway.
  await eventually(() => logged(lines).left === 1, 'the joiner has left')
  await eventually(async () => (await app.inject('/profile/alice')).headers['x-cache'] === 'HIT', 'the revalidation stored its answer')
  t.equal(sim.stats.abortedResponses, 0, 'never cancelled')
  t.equal(sim.callsFor('profile', 'alice'), 2)
})

t.test('a batch whose client leaves cancels its loads, and starts none of those it had not begun', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app, sim } = await stack(t, { logger, env: { ...PATIENT, UPSTREAM_MAX_CONCURRENCY: '2' } })
  await app.tokens.getToken()
  const caller = await callers(t, app)
  sim.failAlways({ kind: 'hang' })
  const batch = caller('/profiles?username=b-1&username=b-2&username=b-3&username=b-4')
  await eventually(() => sim.stats.dataCalls === 2, 'two members at the upstream, as many as it may take at once')
  batch.leave()
  await eventually(() => sim.stats.abortedResponses === 2, 'both calls aborted')
  sim.failAlways(undefined)
  t.equal((await app.inject('/profile/next')).statusCode, 200, 'the slots are free')
  t.same(['b-3', 'b-4'].map((name) => sim.callsFor('profile', name)), [0, 0], 'the members not begun never reach the upstream')
  t.equal(app.upstream.breakerState, 'closed')
  t.same(logged(lines), { alarming: [], left: 1 }, 'one line for the batch, none for its members')
})

t.test('a cancelled load releases its claim: the instance waiting for it loads at once', async (t) => {
  const { app, sim, another } = await cacheStack(t, { env: PATIENT })
  const second = await another()
  const caller = await callers(t, app)
  sim.failNext({ kind: 'hang' })
  const leaving = caller('/profile/claimed')
  await eventually(() => sim.callsFor('profile', 'claimed') === 1, 'the first instance loads')
  const waiting = second.inject('/profile/claimed')
  await eventually(async () => await coalesced(second) === 1, 'the second instance waits for the first one\'s load')
  leaving.leave()
  const res = await waiting
  t.equal(res.statusCode, 200, 'woken by the release, not by the end of a load that was still claimed')
  t.equal(res.headers['x-cache'], 'MISS')
  t.equal(sim.callsFor('profile', 'claimed'), 2, 'the cancelled load and the waiter\'s own')
  t.equal(sim.stats.abortedResponses, 1)
  t.equal(await upstreamCalls(app, 'cancelled'), 1, 'the first instance\'s call was cancelled, not cut off by its deadline')
})
