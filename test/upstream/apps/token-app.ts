import { Redis } from 'ioredis'
import t from 'tap'
import { anotherApp, Clock, eventually, profiles, REDIS_URL, stack, tally, tokenKeyOf, untilRedisReady, usernames } from '../../helper.ts'

// Token lifecycle through the whole app, against the simulator's identity provider.
const NO_RATE_LIMIT = { RATE_LIMIT_PER_MINUTE: '0' }

t.test('200 concurrent requests with no token cause exactly one exchange', async (t) => {
  // Counts, not deadlines: a starved machine took 34 of the 200 past the default 5 s.
  const { app, sim } = await stack(t, { env: { ...NO_RATE_LIMIT, UPSTREAM_TIMEOUT_MS: '30000' }, sim: { tokenLatencyMs: 50 } })
  const responses = await profiles(app, usernames(200))
  t.same(tally(responses), { 200: 200 })
  t.equal(sim.stats.tokenRequests, 1)
  t.equal(sim.stats.tokensIssued, 1)
  t.equal(sim.stats.dataCalls, 200)
})

t.test('200 concurrent 401s cause exactly one renewal', async (t) => {
  const { app, sim, config } = await stack(t, { env: NO_RATE_LIMIT })
  t.equal((await app.inject('/profile/warm-up')).statusCode, 200)
  sim.revokeTokens()
  const responses = await profiles(app, usernames(200))
  t.same(tally(responses), { 200: 200 })
  t.equal(sim.stats.tokensIssued, 2, 'one renewal')
  // Tokens are taken inside a slot: only calls already in flight carried the revoked one.
  t.ok(sim.stats.rejectedTokens <= config.UPSTREAM_MAX_CONCURRENCY, `${sim.stats.rejectedTokens} refusals`)
  t.equal(sim.stats.dataCalls, 201 + sim.stats.rejectedTokens, 'each refused call retried once')
})

t.test('two instances on one Redis cause one exchange between them; Redis holds no plain token', async (t) => {
  const { app, sim, config } = await stack(t, { env: { ...NO_RATE_LIMIT, REDIS_URL } })
  const other = await anotherApp(t, config)
  await Promise.all([untilRedisReady(app), untilRedisReady(other)])
  const responses = await Promise.all([profiles(app, usernames(50, 'one')), profiles(other, usernames(50, 'two'))])
  t.same(tally(responses.flat()), { 200: 100 })
  t.equal(sim.stats.tokenRequests, 1)
  t.equal(sim.stats.tokensIssued, 1)

  const token = sim.stats.lastAuthorization?.replace(/^Bearer /, '') ?? ''
  t.match(token, /^sim_/)
  const redis = new Redis(REDIS_URL)
  t.teardown(() => redis.quit())
  const stored = await redis.get(tokenKeyOf(config))
  t.type(stored, 'string')
  t.notMatch(stored, token)
  t.notMatch(stored, 'sim_')
  t.notMatch(stored, config.CLIENT_SECRET)
})

t.test('an identity provider answering in 1.5 s: its one exchange serves the callers, whatever UPSTREAM_TIMEOUT_MS', async (t) => {
  for (const timeoutMs of ['5000', '1000']) {
    const { app, sim } = await stack(t, { env: { ...NO_RATE_LIMIT, UPSTREAM_TIMEOUT_MS: timeoutMs }, sim: { tokenLatencyMs: 1_500 } })
    // Refused at the exchange's deadline (the unit tests time that on their clock); a machine so busy that the answer
    // is read before the deadline's timer fires serves it.
    const first = await app.inject('/profile/first')
    t.ok([200, 502, 504].includes(first.statusCode), `${timeoutMs} ms: the first caller ${first.statusCode}`)
    await eventually(async () => (await app.inject('/profile/later')).statusCode === 200, 'a 200 from that exchange', 5_000)
    t.equal(sim.stats.tokenRequests, 1, `${timeoutMs} ms: one exchange`)
    t.equal(sim.stats.tokensIssued, 1)
  }
})

t.test('an identity provider slower than UPSTREAM_TIMEOUT_MS: the caller gets 504 at its deadline, the next ones 502 at once', async (t) => {
  // The back-off counts on the app's clock, which stands still: on the real one a stall could outlast it before bob asks.
  const { app, sim } = await stack(t, { env: { UPSTREAM_TIMEOUT_MS: '300' }, now: new Clock().now })
  sim.failTokenNext({ kind: 'hang' })
  const res = await app.inject('/profile/alice')
  t.same(res.json(), { statusCode: 504, code: 'UPSTREAM_TIMEOUT', error: 'Gateway Timeout', message: 'The profile service did not answer within 300 ms' })
  await eventually(() => app.tokens.state === 'failing', 'the exchange timed out too')
  t.match((await app.inject('/profile/bob')).json(), {
    statusCode: 502,
    code: 'UPSTREAM_AUTH_FAILED',
    message: /the identity provider is failing; next attempt in [12] s/
  })
  t.equal(sim.stats.tokenRequests, 1)
  t.equal(sim.stats.dataCalls, 0)
})

t.test('after a failed exchange, callers fail fast instead of each trying again', async (t) => {
  // The first back-off lasts at least a second of the app's clock, which stands still: these all arrive within it.
  const { app, sim } = await stack(t, { env: NO_RATE_LIMIT, now: new Clock().now })
  sim.failTokenNext({ kind: 'status', status: 503 })
  t.match((await app.inject('/profile/alice')).json(), { code: 'UPSTREAM_AUTH_FAILED' })
  const responses = await profiles(app, usernames(20))
  t.same(tally(responses), { '502 UPSTREAM_AUTH_FAILED': 20 })
  t.match(responses[0]?.json(), { message: /the identity provider is failing; next attempt in [12] s/ })
  t.equal(sim.stats.tokenRequests, 1)
  t.equal(app.tokens.state, 'failing')
})

for (const [status, retryAfter] of [[429, '30'], [503, '30'], [429, 'HTTP date']] as const) {
  t.test(`an identity provider answering ${status} with Retry-After (${retryAfter}): no exchange before it says, callers refused at once`, async (t) => {
    const clock = new Clock()
    const { app, sim } = await stack(t, { env: NO_RATE_LIMIT, now: clock.now })
    sim.failTokenNext({ kind: 'status', status, retryAfter: retryAfter === 'HTTP date' ? new Date(Date.now() + 30_000).toUTCString() : retryAfter })
    t.match((await app.inject('/profile/first')).json(), { statusCode: 502, code: 'UPSTREAM_AUTH_FAILED' })
    // Past the back-off it would take of its own (1 to 1.5 s), within what the provider asked.
    clock.advance(5_000)
    const during = await app.inject('/profile/during')
    t.match(during.json(), { statusCode: 502, code: 'UPSTREAM_AUTH_FAILED', message: /next attempt in 2[4-6] s/ })
    t.equal(sim.stats.tokenRequests, 1, 'no exchange before the provider said')
    clock.advance(26_000)
    t.equal((await app.inject('/profile/after')).statusCode, 200, 'then one exchange, and served')
    t.equal(sim.stats.tokenRequests, 2)
  })
}

t.test('an upstream that refuses every token: two exchanges per back-off, callers refused at once meanwhile', async (t) => {
  const clock = new Clock()
  const { app, sim } = await stack(t, { env: NO_RATE_LIMIT, now: clock.now })
  sim.failAlways({ kind: 'status', status: 401 })
  t.match((await app.inject('/profile/first')).json(), { statusCode: 502, code: 'UPSTREAM_AUTH_FAILED' })
  t.equal(sim.stats.tokenRequests, 2, 'its token, and one renewal after its refusal')
  const during = []
  for (let i = 0; i < 20; i++) during.push(await app.inject(`/profile/during-${i}`))
  t.same(tally(during), { '502 UPSTREAM_AUTH_FAILED': 20 })
  t.equal(sim.stats.tokenRequests, 2, 'no exchange during the back-off')
  t.equal(sim.stats.dataCalls, 2, 'nor any call')
  clock.advance(1_500)
  t.match((await app.inject('/profile/after')).json(), { statusCode: 502, code: 'UPSTREAM_AUTH_FAILED' })
  t.equal(sim.stats.tokenRequests, 4, 'once the back-off is over: a token, and one renewal after its refusal')
  t.equal(app.tokens.state, 'failing')
})

t.test('a refusal that is not about the token (a 403 on one member), or a token revoked twice in a minute, refuses nobody else', async (t) => {
  const clock = new Clock()
  const { app, sim } = await stack(t, { env: NO_RATE_LIMIT, now: clock.now })
  t.equal((await app.inject('/profile/warm')).statusCode, 200)
  // This member's calls are refused whatever the token: the call and its one retry with a renewed token.
  sim.failNext({ kind: 'status', status: 403 }, 2)
  t.match((await app.inject('/profile/private-member')).json(), { statusCode: 502, code: 'UPSTREAM_AUTH_FAILED' })
  t.equal((await app.inject('/profile/bob')).statusCode, 200, 'another member is served at once')
  sim.revokeTokens()
  t.equal((await app.inject('/profile/a')).statusCode, 200, 'a revoked token: renewed, the call sent again')
  clock.advance(30_000)
  sim.revokeTokens()
  t.equal((await app.inject('/profile/b')).statusCode, 200, 'revoked again half a minute later: renewed again')
  t.equal(app.tokens.state, 'held')
})

t.test('neither the token nor the secret reaches a log line, a response or an error message', async (t) => {
  const lines: string[] = []
  const clock = new Clock()
  const { app, sim, config } = await stack(t, {
    env: { CLIENT_SECRET: 'very-secret-value' },
    sim: { clientSecret: 'very-secret-value' },
    logger: { level: 'trace', stream: { write: (line: string) => { lines.push(line) } } },
    now: clock.now
  })
  const bodies: string[] = []
  bodies.push((await app.inject('/profile/a1')).body)
  sim.revokeTokens()
  bodies.push((await app.inject('/profile/a2')).body)
  // A minute on: a refusal that long after the last is renewed at once, not a failed exchange.
  clock.advance(60_000)
  sim.failAlways({ kind: 'status', status: 401 })
  bodies.push((await app.inject('/profile/a3')).body)
  // Past the back-off that the renewed token's refusal started.
  clock.advance(1_500)
  sim.failAlways(undefined)
  sim.failTokenNext({ kind: 'status', status: 500 })
  sim.revokeTokens()
  bodies.push((await app.inject('/profile/a4')).body)

  t.equal(sim.stats.tokensIssued, 3)
  t.equal(lines.filter((line) => line.includes('upstream token minted')).length, 3, 'one info line per token minted')
  const everything = [...lines, ...bodies].join('\n')
  t.notMatch(everything, 'sim_')
  t.notMatch(everything, config.CLIENT_SECRET)
})

t.test('a token announced for ever (expires_in 1e16) is kept a year, and shared: two instances, one exchange', async (t) => {
  const { app, sim, config } = await stack(t, { env: { ...NO_RATE_LIMIT, REDIS_URL }, sim: { tokenTtlSeconds: 1e16 } })
  const other = await anotherApp(t, config)
  await Promise.all([untilRedisReady(app), untilRedisReady(other)])
  t.equal((await app.inject('/profile/one')).statusCode, 200)
  t.equal((await other.inject('/profile/two')).statusCode, 200)
  t.equal(sim.stats.tokenRequests, 1, 'the other instance adopted the shared token')
  const redis = new Redis(REDIS_URL)
  t.teardown(() => redis.quit())
  const leftMs = await redis.pttl(tokenKeyOf(config))
  const yearMs = 365 * 86_400_000
  t.ok(leftMs > yearMs - 60_000 && leftMs <= yearMs, `kept ${leftMs} ms: a year`)
})
