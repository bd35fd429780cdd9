import { randomBytes } from 'node:crypto'
import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { Command } from 'ioredis'
import { loggerOptions } from '../../src/logging/logging.ts'
import { cacheStack, capturedLogger, type CacheStack, eventually, gate, metric, parseMetrics, stack, tokenKeyOf } from '../helper.ts'
import { flushSpans, otlpReceiver, type ReceivedSpan } from './otlp-receiver.ts'

// One collector for the file: the SDK is the process's global provider, started by the first app with the first endpoint.
const receiver = await otlpReceiver()
t.teardown(() => receiver.close())
const TRACED = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint }
const SERVER = 2
const CLIENT = 3
/** What went out to upstreams and clients during the file: no span may hold any of it. */
const secrets = new Set<string>()

/** A caller's `traceparent` with a trace id of its own, so that each request's trace is told apart. */
function caller (): { traceId: string, spanId: string, traceparent: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` }
}

/** The spans of one trace exported so far. */
async function traceOf (traceId: string): Promise<ReceivedSpan[]> {
  await flushSpans()
  return receiver.spans.filter((span) => span.traceId === traceId)
}

/** Requests of this instance that waited for a load another request started (here, or on another instance). */
async function waiters (app: FastifyInstance): Promise<number> {
  return metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_coalesced_waiters_total', { resource: 'profile' }) ?? 0
}

function one (spans: ReceivedSpan[], name: string, where: Partial<ReceivedSpan['attributes']> = {}): ReceivedSpan {
  const found = spans.filter((span) => span.name === name && Object.entries(where).every(([key, value]) => span.attributes[key] === value))
  if (found.length !== 1) throw new Error(`expected one ${name} span ${JSON.stringify(where)}, found ${found.length}: ${spans.map((s) => s.name).join(', ')}`)
  return found[0] as ReceivedSpan
}

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] => spans.filter((span) => span.parentSpanId === parent.spanId)
const traceparentOf = (span: ReceivedSpan): string => `00-${span.traceId}-${span.spanId}-01`

/**
 * A traced cold miss on an app whose Redis stayed up throughout. On a loaded machine a command can miss the Redis
 * layer's 500 ms bound, and the lookup then rightly reads without Redis: such a run is done again, on a new app.
 */
async function coldMissWithRedisUp (t: Test): Promise<CacheStack & ReturnType<typeof caller> & { res: LightMyRequestResponse }> {
  for (let attempt = 1; ; attempt++) {
    const stack = await cacheStack(t, { env: TRACED })
    let wentDown = false
    stack.app.redisLayer?.health.listen((up) => { if (!up) wentDown = true })
    const ids = caller()
    const res = await stack.app.inject({ url: '/profile/alice', headers: { traceparent: ids.traceparent } })
    if (!wentDown) return { ...stack, ...ids, res }
    t.comment(`Redis's health went down during cold miss ${attempt}`)
    if (attempt === 3) throw new Error('Redis\'s health went down during three cold misses in a row')
  }
}

t.test('a cold miss: the caller\'s trace continued, the story of the load told, the traceparent sent upstream and to the identity provider', async (t) => {
  const { app, sim, traceId, spanId, res } = await coldMissWithRedisUp(t)
  t.equal(res.headers['x-cache'], 'MISS')
  secrets.add(String(sim.stats.lastAuthorization).replace(/^Bearer /, ''))

  const spans = await traceOf(traceId)
  const server = one(spans, 'GET /profile/:username')
  t.equal(server.parentSpanId, spanId, 'the incoming traceparent is continued')
  t.equal(server.kind, SERVER)
  t.match(server.attributes, {
    'http.request.method': 'GET', 'http.route': '/profile/:username', 'url.path': '/profile/alice', 'http.response.status_code': 200, 'pbff.cache.state': 'MISS'
  })
  const lookup = one(childrenOf(spans, server), 'cache.lookup')
  t.match(lookup.attributes, { 'pbff.cache.state': 'MISS', 'pbff.resource': 'profile' })
  const load = one(childrenOf(spans, lookup), 'cache.load')
  t.match(load.attributes, { 'pbff.coalescer': 'owner', 'pbff.lock': 'owner', 'pbff.load.cause': 'miss' })
  const call = one(childrenOf(spans, load), 'upstream.call')
  t.match(call.attributes, { 'pbff.resource': 'profile', 'pbff.priority': 'caller', 'pbff.upstream.outcome': 'ok' })
  const token = one(childrenOf(spans, call), 'upstream.token')
  t.equal(token.attributes['pbff.token'], 'renewed', 'no token yet: this call started the exchange')
  const get = one(childrenOf(spans, call), 'GET')
  t.match(get, { kind: CLIENT, attributes: { 'url.path': '/profile/alice', 'http.response.status_code': 200 } })
  t.equal(sim.stats.lastTraceparent, traceparentOf(get), 'the upstream received the traceparent of the call\'s span')
  const exchange = one(spans, 'POST')
  t.match(exchange, { kind: CLIENT, attributes: { 'url.path': '/oauth/token' } })
  t.ok([token.spanId, call.spanId].includes(exchange.parentSpanId ?? ''), 'the exchange belongs to the token the call waited for')
  t.equal(sim.stats.lastTokenTraceparent, traceparentOf(exchange), 'the identity provider received the traceparent of the exchange\'s span')
  const commands = spans.filter((span) => span.attributes['db.system.name'] === 'redis')
  // A cold miss's two round trips, each one script, named for what it does.
  const read = one(childrenOf(spans, lookup), 'EVAL read_or_claim')
  t.match(read, { kind: CLIENT, attributes: { 'db.operation.name': 'EVAL', 'db.stored_procedure.name': 'read_or_claim' } },
    'the entry read and the owner lock claimed by the lookup, before its load')
  t.match(one(childrenOf(spans, load), 'EVAL store_and_release').attributes, { 'db.stored_procedure.name': 'store_and_release' },
    'the fill stored, told to the other instances and the lock released, within the load')
  t.notOk(commands.some((span) => span.name === 'SET' && [lookup.spanId, load.spanId].includes(span.parentSpanId ?? '')), 'no claim of its own')
  t.notOk(commands.some((span) => span.name === 'PUBLISH' && span.parentSpanId === load.spanId), 'no publish of its own')
  for (const command of commands) {
    const script = command.name.startsWith('EVAL ') ? ['db.stored_procedure.name'] : []
    t.same(Object.keys(command.attributes).sort(), ['db.namespace', 'db.operation.name', ...script, 'db.system.name', 'server.address', 'server.port'].sort(),
      `${command.name}: its name, never its arguments`)
  }

  const metrics = (await app.inject('/metrics')).body
  t.match(metrics, new RegExp(`^pbff_upstream_call_duration_seconds_bucket\\{[^}]*\\} \\d+ # \\{trace_id="${traceId}",span_id="[\\da-f]{16}"\\}`, 'm'),
    'the upstream latency histogram names the sampled trace (an exemplar)')
  t.match(metrics, new RegExp(`^pbff_http_request_duration_seconds_bucket\\{[^}]*route="/profile/:username"\\} \\d+ # \\{trace_id="${traceId}"`, 'm'))
})

t.test('a cold miss\'s Redis commands are its own spans while untraced commands go out in every turn of the event loop', async (t) => {
  const { app } = await cacheStack(t, { env: TRACED })
  // Commands for nobody (as the health probe's and the membership's are), one each turn: were commands batched per
  // turn (ioredis's auto-pipelining), the miss's would go out in a batch one of these opened, and in its context.
  let pinging = true
  const ping = (): void => {
    if (!pinging) return
    app.redisLayer?.client.ping().catch(() => {})
    setImmediate(ping)
  }
  ping()
  const ids = caller()
  const res = await app.inject({ url: '/profile/bob', headers: { traceparent: ids.traceparent } })
  pinging = false
  t.equal(res.headers['x-cache'], 'MISS')
  const spans = await traceOf(ids.traceId)
  const lookup = one(spans, 'cache.lookup')
  t.equal(one(childrenOf(spans, lookup), 'EVAL read_or_claim').traceId, ids.traceId, 'the read is the lookup\'s child')
  t.equal(one(childrenOf(spans, one(childrenOf(spans, lookup), 'cache.load')), 'EVAL store_and_release').traceId, ids.traceId, 'the store is the load\'s child')
})

t.test('a hit is one server span with the cache state, and nothing more', async (t) => {
  const { app } = await cacheStack(t, { env: TRACED })
  await app.inject('/profile/bob')
  const { traceId, traceparent } = caller()
  t.equal((await app.inject({ url: '/profile/bob', headers: { traceparent } })).headers['x-cache'], 'HIT')
  const spans = await traceOf(traceId)
  t.equal(spans.length, 1)
  t.match(spans[0], { name: 'GET /profile/:username', kind: SERVER, attributes: { 'pbff.cache.state': 'HIT', 'http.response.status_code': 200 } })
})

t.test('a caller that joins a load under way in its instance links to the span of that load', async (t) => {
  const upstream = await gate(t)
  const { app, sim } = await cacheStack(t, { env: TRACED, gate: upstream })
  const first = caller()
  const second = caller()
  upstream.hold()
  const answering = Promise.all([
    app.inject({ url: '/profile/carol', headers: { traceparent: first.traceparent } }),
    app.inject({ url: '/profile/carol', headers: { traceparent: second.traceparent } })
  ])
  // The load is held until the second caller has joined it, however busy the machine.
  await eventually(async () => upstream.held() === 1 && await waiters(app) === 1, 'the second caller waits for the load')
  upstream.release()
  const answers = await answering
  t.same(answers.map((res) => res.headers['x-cache']), ['MISS', 'MISS'])
  t.equal(sim.callsFor('profile', 'carol'), 1)
  const owner = one(await traceOf(first.traceId), 'cache.load', { 'pbff.coalescer': 'owner' })
  const waiter = one(await traceOf(second.traceId), 'cache.load', { 'pbff.coalescer': 'waiter' })
  t.same(waiter.links, [{ traceId: first.traceId, spanId: owner.spanId }])
  t.notOk((await traceOf(second.traceId)).some((span) => span.name === 'upstream.call'), 'the waiter called nobody')
})

t.test('a waiter on a second instance links to the span of the load the first instance made for it', async (t) => {
  const upstream = await gate(t)
  const { app, sim, another } = await cacheStack(t, { env: TRACED, gate: upstream })
  const second = await another()
  const first = caller()
  const waiter = caller()
  upstream.hold()
  const owning = app.inject({ url: '/profile/dave', headers: { traceparent: first.traceparent } })
  await eventually(() => upstream.held() === 1, 'the first instance is loading')
  const waiting = second.inject({ url: '/profile/dave', headers: { traceparent: waiter.traceparent } })
  // The load is held until the second instance waits for it, however busy the machine.
  await eventually(async () => await waiters(second) === 1, 'the second instance waits for the first one\'s load')
  upstream.release()
  const answers = await Promise.all([owning, waiting])
  t.same(answers.map((res) => res.headers['x-cache']), ['MISS', 'MISS'])
  t.equal(sim.callsFor('profile', 'dave'), 1, 'one upstream call for both instances')

  const owner = one(await traceOf(first.traceId), 'cache.load', { 'pbff.lock': 'owner' })
  const spans = await traceOf(waiter.traceId)
  const waited = one(spans, 'cache.load', { 'pbff.lock': 'waiter' })
  t.same(waited.links, [{ traceId: first.traceId, spanId: owner.spanId }], 'carried by the bus message that woke it')
  t.notOk(spans.some((span) => span.name === 'upstream.call'), 'the waiter called nobody')
})

/** How many times `app` found the token's lock taken (a SET NX answered nil): it then waits for the owner's exchange. */
function tokenLockTaken (t: Test, app: FastifyInstance): () => number {
  const lock = `${tokenKeyOf(app.config)}:lock`
  const client = app.redisLayer?.client
  if (client === undefined) throw new Error('the app has no Redis')
  let taken = 0
  const original = client.sendCommand
  client.sendCommand = function (this: typeof client, command: Command, ...rest: unknown[]) {
    if (command.name === 'set' && String(command.args[0]) === lock) {
      const { resolve } = command
      command.resolve = (value) => { if (value === null) taken++; resolve(value) }
    }
    return (original as (...args: unknown[]) => unknown).call(this, command, ...rest)
  } as typeof client.sendCommand
  t.teardown(() => { client.sendCommand = original })
  return () => taken
}

t.test('an instance that waits for another one\'s token exchange links to it, then adopts its token', async (t) => {
  const provider = await gate(t)
  const { app, sim, another } = await cacheStack(t, { env: { ...TRACED, AUTH_URL: provider.url } })
  provider.target = sim.authUrl
  const second = await another()
  const lockTaken = tokenLockTaken(t, second)
  const first = caller()
  const waiter = caller()
  provider.hold()
  const exchanging = app.inject({ url: '/profile/heidi', headers: { traceparent: first.traceparent } })
  await eventually(() => provider.held() === 1, 'the first instance is exchanging credentials')
  const waiting = second.inject({ url: '/profile/ivan', headers: { traceparent: waiter.traceparent } })
  // The exchange is held until the second instance waits for it, however busy the machine (within the exchange's 1 s).
  await eventually(() => lockTaken() > 0, 'the second instance found the exchange under way')
  provider.release()
  t.same((await Promise.all([exchanging, waiting])).map((res) => res.statusCode), [200, 200])
  t.equal(sim.stats.tokensIssued, 1, 'one exchange for both instances')
  const exchange = one(await traceOf(first.traceId), 'upstream.token', { 'pbff.token': 'renewed' })
  const adopted = one(await traceOf(waiter.traceId), 'upstream.token', { 'pbff.token': 'adopted' })
  t.same(adopted.links, [{ traceId: first.traceId, spanId: exchange.spanId }])
})

t.test('a stale answer: served at once, and its background revalidation in the same trace', async (t) => {
  const { app, sim, clock } = await cacheStack(t, { env: TRACED })
  await app.inject('/profile/erin')
  clock.advance(301_000)
  const { traceId, traceparent } = caller()
  t.equal((await app.inject({ url: '/profile/erin', headers: { traceparent } })).headers['x-cache'], 'STALE')
  await eventually(async () => (await traceOf(traceId)).some((span) => span.name === 'cache.load'), 'the revalidation ended')
  t.equal(sim.callsFor('profile', 'erin'), 2)
  const spans = await traceOf(traceId)
  const server = one(spans, 'GET /profile/:username')
  t.equal(server.attributes['pbff.cache.state'], 'STALE')
  const lookup = one(childrenOf(spans, server), 'cache.lookup')
  t.equal(lookup.attributes['pbff.cache.state'], 'STALE')
  const revalidation = one(childrenOf(spans, lookup), 'cache.load')
  t.match(revalidation.attributes, { 'pbff.load.cause': 'revalidation', 'pbff.lock': 'owner' })
  t.match(one(childrenOf(spans, revalidation), 'upstream.call').attributes, { 'pbff.priority': 'background', 'pbff.upstream.outcome': 'ok' })
})

t.test('log lines name the trace and span they were written in', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app } = await stack(t, { env: TRACED, logger: { ...logger, ...loggerOptions('info', true) } })
  const { traceId, traceparent } = caller()
  await app.inject({ url: '/profile/frank', headers: { traceparent } })
  const server = one(await traceOf(traceId), 'GET /profile/:username')
  t.match(lines.find((line) => line.msg === 'request completed'), { trace_id: traceId, span_id: server.spanId })
})

t.test('no span holds a token, a secret, a credential or an Authorization header', async (t) => {
  const admin = `admin-${randomBytes(12).toString('hex')}`
  const { app, sim } = await stack(t, { env: { ...TRACED, ADMIN_TOKEN: admin } })
  const { traceId, traceparent } = caller()
  const leaked = `leak-${randomBytes(12).toString('hex')}`
  await app.inject({ url: `/profile/grace?access_token=${leaked}`, headers: { traceparent, authorization: `Bearer ${leaked}` } })
  t.equal((await app.inject({ method: 'POST', url: '/admin/purge/grace', headers: { authorization: `Bearer ${admin}` } })).statusCode, 200)
  secrets.add(String(sim.stats.lastAuthorization).replace(/^Bearer /, '')).add(sim.options.clientSecret).add(admin).add(leaked)
  t.ok((await traceOf(traceId)).length > 3, 'the miss was traced')

  const exported = receiver.bodies.join('\n')
  for (const secret of secrets) t.notOk(exported.includes(secret), `${secret.slice(0, 6)}… is in no span`)
  t.notMatch(exported, /authorization|bearer|client_secret|access_token/i)
  const suspect = receiver.spans.flatMap((span) => Object.keys(span.attributes)
    .filter((key) => /header|auth|secret|query\.text|statement|args/i.test(key)).map((key) => `${span.name}: ${key}`))
  t.same(suspect, [], 'no attribute of any span is a header, a credential or a command\'s arguments')
})
