import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { cacheStack, capturedLogger, Clock, eventually, gate, metric, parseMetrics, stack, type LogLine, type StackOptions, type TestContext } from '../helper.ts'

// A call sent is an answer kept (issue 32): callers leaving never abort a sent call, whose answer fills the cache; a
// call not yet sent whose callers have all left is dropped unsent, and only that counts as `cancelled`.
// Callers are real HTTP clients that close their connection.

/** Long enough that no deadline, only a caller leaving, could end a call during a test. */
const PATIENT = { UPSTREAM_TIMEOUT_MS: '30000' }
/** What the upstream takes in the test whose load another instance waits for. */
const SLOW = { latencyMs: 1_000 }

interface Caller {
  /** Resets the connection before the answer: a client that closed outright (a half-close alone is no leaving). */
  leave: () => void
  /** The status of the answer, once the server ends the connection. */
  answer: Promise<number>
}

/** The app on a port of its own, and callers of it over connections of their own, each of which may walk away. */
async function callers (t: TestContext, app: FastifyInstance): Promise<(path: string) => Caller> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  const sockets: Socket[] = []
  t.teardown(() => { for (const socket of sockets) socket.destroy() })
  return (path) => {
    const socket = connect({ port, host: '127.0.0.1' })
    sockets.push(socket)
    socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`)
    const answer = new Promise<number>((resolve, reject) => {
      let text = ''
      socket.setEncoding('utf8')
      socket.on('data', (chunk: string) => { text += chunk })
      socket.on('end', () => { resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1])) })
      socket.on('error', reject)
    })
    // A caller that left is answered by nobody.
    answer.catch(() => {})
    return { leave: () => socket.resetAndDestroy(), answer }
  }
}

/**
 * An app (with the token held) whose upstream calls wait at a gate while the test holds it: every caller leaves before
 * the upstream answers however slow the machine, where a latency a busy machine may outlast would not say so.
 */
async function gatedStack (t: TestContext, options: Pick<StackOptions, 'env' | 'logger' | 'now'> = {}) {
  const held = await gate(t)
  const { app, sim } = await stack(t, { ...options, env: { ...PATIENT, ...options.env, UPSTREAM_BASE_URL: held.url }, sim: { audience: held.url } })
  held.target = sim.baseUrl
  await app.tokens.getToken()
  return { app, sim, held }
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

t.test('callers that leave once the call is sent do not abort it: its answer fills the cache, and the next caller gets it with no new call', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app, sim, held } = await gatedStack(t, { logger })
  const caller = await callers(t, app)
  held.hold()
  const pair = [caller('/profile/left'), caller('/profile/left')]
  await eventually(async () => await coalesced(app) === 1 && held.held() === 1, 'both wait for one call at the upstream')
  for (const each of pair) each.leave()
  await eventually(() => logged(lines).left === 2, 'both callers have gone')
  t.equal(await upstreamCalls(app, 'ok'), undefined, 'they left before the upstream answered')
  held.release()
  await eventually(async () => await upstreamCalls(app, 'ok') === 1, 'the call runs to its answer')
  const next = await app.inject('/profile/left')
  t.equal(next.statusCode, 200)
  t.equal(next.headers['x-cache'], 'HIT', 'stored for the next caller')
  t.equal(sim.callsFor('profile', 'left'), 1, 'no second call')
  t.equal(held.aborted(), 0, 'never aborted at the upstream')
  t.equal(await upstreamCalls(app, 'cancelled'), undefined, 'a sent call is never cancelled')
  t.same(logged(lines), { alarming: [], left: 2 }, 'no warning: neither the upstream nor the callers did anything wrong')
})

t.test('a sent call keeps its slot while its callers are gone, and its failure counts like any other', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app, sim, held } = await gatedStack(t, { logger, env: { UPSTREAM_MAX_CONCURRENCY: '1' } })
  const caller = await callers(t, app)
  sim.failNext({ kind: 'status', status: 502 })
  held.hold()
  const holder = caller('/profile/holder')
  await eventually(() => held.held() === 1, 'the holder\'s call is sent, with the only slot')
  holder.leave()
  await eventually(() => logged(lines).left === 1, 'its caller has gone')
  const next = app.inject('/profile/next')
  await eventually(async () => await scraped(app, 'pbff_upstream_calls_queued') === 1, 'the next call waits for a slot')
  t.equal(await scraped(app, 'pbff_upstream_calls_in_flight'), 1, 'the holder\'s call keeps its slot, though nobody waits for its answer')
  t.equal(held.held(), 1, 'the next call waited for the slot until then')
  held.release()
  t.equal((await next).statusCode, 200, 'then had it')
  t.same([sim.callsFor('profile', 'holder'), sim.callsFor('profile', 'next')], [1, 1])
  t.equal(await upstreamCalls(app, 'error'), 1, 'the holder\'s call ran to its (failed) answer')
  const measured = await scraped(app, 'pbff_upstream_call_duration_seconds_count', { resource: 'profile' })
  t.equal(measured, 2, 'both calls measured as upstream latencies')
  t.same(logged(lines).alarming, ['upstream call failed'], 'one warn line, as for any failed call')
})

t.test('a queued call whose callers all left is dropped unsent and counted as cancelled; a later caller loads anew', async (t) => {
  const { app, sim, held } = await gatedStack(t, { env: { UPSTREAM_MAX_CONCURRENCY: '1' } })
  const caller = await callers(t, app)
  const requests = received(app)
  held.hold()
  const holder = caller('/profile/holder')
  await eventually(() => held.held() === 1, 'the holder has the only slot')
  const queued = caller('/profile/queued')
  await eventually(() => requests() === 2, 'the second caller is queued behind it')
  queued.leave()
  await eventually(async () => await upstreamCalls(app, 'cancelled') === 1, 'the queued call is dropped, counted as cancelled')
  held.release()
  t.equal(await holder.answer, 200)
  t.equal(sim.callsFor('profile', 'queued'), 0, 'the call whose caller left was never sent')
  t.equal(await upstreamCalls(app, 'short_circuited'), undefined, 'nor refused')
  const again = await app.inject('/profile/queued')
  t.equal(again.headers['x-cache'], 'MISS', 'a dropped load stores nothing: the next caller loads')
  t.equal(sim.callsFor('profile', 'queued'), 1)
  t.equal(app.upstream.breakerState, 'closed')
})

t.test('a background revalidation runs to its end, even when a caller that joined it leaves', async (t) => {
  const clock = new Clock(Date.now())
  const { logger, lines } = capturedLogger()
  const { app, sim, held } = await gatedStack(t, { logger, now: clock.now, env: { PROFILE_TTL_SECONDS: '60', STALE_TTL_SECONDS: '60' } })
  const caller = await callers(t, app)
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  clock.advance(61_000)
  held.hold()
  const stale = await app.inject('/profile/alice')
  t.equal(stale.headers['x-cache'], 'STALE', 'the caller that triggered the revalidation has its answer at once')
  await eventually(() => held.held() === 1, 'the revalidation is at the upstream')
  clock.advance(60_000) // the stale entry is no longer servable: the next caller waits for the revalidation
  const joiner = caller('/profile/alice')
  await eventually(async () => await coalesced(app) === 1, 'a caller joins the revalidation')
  joiner.leave()
  await eventually(() => logged(lines).left === 1, 'the joiner has left')
  held.release()
  await eventually(async () => (await app.inject('/profile/alice')).headers['x-cache'] === 'HIT', 'the revalidation stored its answer')
  t.equal(held.aborted(), 0, 'never cancelled')
  t.equal(sim.callsFor('profile', 'alice'), 2)
})

t.test('a batch whose client leaves: its members under way run to their answers, those not begun are never sent', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app, sim, held } = await gatedStack(t, { logger, env: { UPSTREAM_MAX_CONCURRENCY: '2' } })
  const caller = await callers(t, app)
  held.hold()
  const batch = caller('/profiles?username=b-1&username=b-2&username=b-3&username=b-4')
  await eventually(() => held.held() === 2, 'two members at the upstream, as many as it may take at once')
  batch.leave()
  await eventually(() => logged(lines).left === 1, 'the batch\'s client has gone')
  held.release()
  await eventually(async () => await upstreamCalls(app, 'ok') === 2, 'both sent calls answered')
  t.same(['b-1', 'b-2'].map((name) => sim.callsFor('profile', name)), [1, 1])
  t.same(['b-3', 'b-4'].map((name) => sim.callsFor('profile', name)), [0, 0], 'the members not begun never reach the upstream')
  t.equal(held.aborted(), 0)
  t.equal((await app.inject('/profile/b-1')).headers['x-cache'], 'HIT', 'a member under way was stored')
  t.same(logged(lines), { alarming: [], left: 1 }, 'one line for the batch, none for its members')
})

t.test('a load whose caller left still answers the instance waiting for it: one call across instances', async (t) => {
  const { app, sim, another } = await cacheStack(t, { env: PATIENT, sim: SLOW })
  const second = await another()
  const caller = await callers(t, app)
  const leaving = caller('/profile/claimed')
  await eventually(() => sim.callsFor('profile', 'claimed') === 1, 'the first instance loads')
  const waiting = second.inject('/profile/claimed')
  await eventually(async () => await coalesced(second) === 1, 'the second instance waits for the first one\'s load')
  leaving.leave()
  const res = await waiting
  t.equal(res.statusCode, 200, 'answered by the first instance\'s load')
  t.equal(sim.callsFor('profile', 'claimed'), 1, 'one call for both instances')
  t.equal(sim.stats.abortedResponses, 0)
  t.equal(await upstreamCalls(app, 'cancelled'), undefined)
})
