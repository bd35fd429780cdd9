import t from 'tap'
import { TokenManager, type TokenManagerOptions } from '../../../src/upstream/token-manager.ts'
import { EXCHANGE_DEADLINE_MS, retryDelay } from '../../../src/upstream/token-timing.ts'
import { Clock, FakeEndpoint, recordingLog, recordingTelemetry, settle } from '../../helper.ts'

function manager (endpoint: FakeEndpoint, options: Partial<TokenManagerOptions> = {}) {
  const clock = new Clock()
  const telemetry = recordingTelemetry()
  const log = recordingLog()
  const tokens = new TokenManager({ endpoint, telemetry, log, lockWaitMs: 1_000, now: clock.now, random: () => 0, ...options })
  return { tokens, clock, telemetry, log }
}

t.test('200 concurrent callers without a token cause exactly one exchange', async (t) => {
  const endpoint = new FakeEndpoint()
  const { tokens } = manager(endpoint)
  const got = await Promise.all(Array.from({ length: 200 }, async () => await tokens.getToken()))
  t.equal(endpoint.exchanges, 1)
  t.same(new Set(got.map((token) => token.value)), new Set(['token-1']))
})

t.test('200 concurrent refusals of one token cause exactly one renewal', async (t) => {
  const endpoint = new FakeEndpoint()
  const { tokens } = manager(endpoint)
  const refused = await tokens.getToken()
  const renewed = await Promise.all(Array.from({ length: 200 }, async () => {
    tokens.invalidate(refused)
    return await tokens.getToken()
  }))
  t.equal(endpoint.exchanges, 2)
  t.same(new Set(renewed.map((token) => token.value)), new Set(['token-2']))
})

t.test('a refusal of a token already replaced keeps the newer one', async (t) => {
  const endpoint = new FakeEndpoint()
  const { tokens } = manager(endpoint)
  const first = await tokens.getToken()
  tokens.invalidate(first)
  t.equal((await tokens.getToken()).value, 'token-2')
  // A call that left with the first token comes back refused after the renewal.
  tokens.invalidate(first)
  t.equal((await tokens.getToken()).value, 'token-2')
  t.equal(endpoint.exchanges, 2)
})

t.test('a token is renewed in the background before it expires; callers never wait for it', async (t) => {
  const endpoint = new FakeEndpoint(100_000)
  const { tokens, clock } = manager(endpoint)
  t.equal(tokens.state, 'none')
  await tokens.getToken()
  t.equal(tokens.state, 'held')
  clock.advance(80_000) // renewal due at 80% of a short life
  endpoint.hold = true
  t.equal((await tokens.getToken()).value, 'token-1', 'the current token, while the renewal is held')
  t.equal(tokens.state, 'renewing')
  t.equal((await tokens.getToken()).value, 'token-1')
  t.equal(endpoint.exchanges, 2, 'one renewal for several callers')
  endpoint.release()
  await settle()
  t.equal((await tokens.getToken()).value, 'token-2')
  t.equal(tokens.state, 'held')
})

t.test('one exchange per lifetime under steady use', async (t) => {
  const endpoint = new FakeEndpoint(3_600_000)
  const { tokens, clock } = manager(endpoint)
  // A call every 10 s for ten lifetimes; each token is renewed 30 s before its hour ends.
  let closestToExpiryMs = Infinity
  for (let elapsed = 0; elapsed <= 36_000_000; elapsed += 10_000) {
    const token = await tokens.getToken()
    closestToExpiryMs = Math.min(closestToExpiryMs, token.expiresAt - clock.now())
    await settle()
    clock.advance(10_000)
  }
  t.equal(endpoint.exchanges, 11)
  t.equal(closestToExpiryMs, 30_000, 'every token handed out had at least REFRESH_SKEW_MS to live')
})

t.test('a token at the end of its life is not handed out: callers wait for the renewal', async (t) => {
  const endpoint = new FakeEndpoint(100_000)
  const { tokens, clock } = manager(endpoint)
  await tokens.getToken()
  clock.advance(95_000) // past 90% of its life
  t.equal((await tokens.getToken()).value, 'token-2')
  t.equal(endpoint.exchanges, 2)
})

t.test('a failing identity provider is retried after each back-off, callers failing fast meanwhile', async (t) => {
  const endpoint = new FakeEndpoint()
  const { tokens, clock, telemetry } = manager(endpoint)
  endpoint.failing = true
  await t.rejects(tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED', message: /answered 500/ })
  t.equal(tokens.state, 'failing')
  // random() = 0: every back-off is 1 s, counted from the failure.
  for (let i = 0; i < 20; i++) await t.rejects(tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED', message: /next attempt in 1 s/ })
  t.equal(endpoint.exchanges, 1, 'no exchange during the back-off')
  clock.advance(1_000)
  await t.rejects(tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED' })
  t.equal(endpoint.exchanges, 2)
  clock.advance(999)
  await t.rejects(tokens.getToken(), { message: /next attempt in 1 s/ })
  t.equal(endpoint.exchanges, 2, 'none during the second back-off')
  clock.advance(1)
  endpoint.failing = false
  t.equal((await tokens.getToken()).value, 'token-3')
  t.equal(tokens.state, 'held')
  t.same(telemetry.events, ['token:failed', 'token:failed', 'token:minted'])
})

t.test('a long outage of the identity provider: at most one exchange a second, callers recover within 1.5 s of its return', async (t) => {
  for (const random of [0, 1]) {
    const endpoint = new FakeEndpoint()
    const { tokens, clock } = manager(endpoint, { random: () => random })
    endpoint.failing = true
    const exchangeTimes: number[] = []
    // A caller every 100 ms for ten minutes of outage.
    for (let elapsed = 0; elapsed < 600_000; elapsed += 100) {
      const before = endpoint.exchanges
      await tokens.getToken().catch(() => {})
      if (endpoint.exchanges > before) exchangeTimes.push(elapsed)
      clock.advance(100)
    }
    const gaps = exchangeTimes.slice(1).map((time, i) => time - (exchangeTimes[i] ?? 0))
    t.ok(Math.min(...gaps) >= 1_000, `random ${random}: exchanges at least 1 s apart (smallest gap ${Math.min(...gaps)} ms)`)
    // The callers come every 100 ms: an exchange starts with the first after its back-off.
    t.ok(Math.max(...gaps) <= 1_600, `random ${random}: and at most 1.5 s apart (largest gap ${Math.max(...gaps)} ms)`)

    endpoint.failing = false
    let recoveredAfter = 0
    while ((await tokens.getToken().then(() => true, () => false)) === false) {
      clock.advance(100)
      recoveredAfter += 100
    }
    t.ok(recoveredAfter <= 1_600, `random ${random}: a caller got a token ${recoveredAfter} ms after the provider recovered`)
  }
})

t.test('a failed background renewal keeps the current token until it is no longer usable', async (t) => {
  const endpoint = new FakeEndpoint(100_000)
  const { tokens, clock } = manager(endpoint)
  await tokens.getToken()
  clock.advance(80_000)
  endpoint.failing = true
  t.equal((await tokens.getToken()).value, 'token-1')
  await settle()
  t.equal(endpoint.exchanges, 2)
  t.equal((await tokens.getToken()).value, 'token-1', 'still usable; no new attempt during the back-off')
  t.equal(endpoint.exchanges, 2)
  t.equal(tokens.state, 'held')
  clock.advance(15_000) // 95 s: within 5 s of expiry, no longer usable
  await t.rejects(tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED' })
  t.equal(endpoint.exchanges, 3)
  t.equal(tokens.state, 'failing')
})

t.test('the back-off is 1 to 1.5 s, at random, however many exchanges failed before', async (t) => {
  t.same([0, 0.5, 1].map((random) => retryDelay(random)), [1000, 1250, 1500])
})

t.test('each minted token is counted and logged once, without the token', async (t) => {
  const endpoint = new FakeEndpoint()
  const { tokens, telemetry, log } = manager(endpoint)
  const token = await tokens.getToken()
  await tokens.getToken()
  t.same(telemetry.events, ['token:minted'])
  t.equal(log.lines.length, 1)
  t.match(JSON.parse(log.lines[0] ?? '{}'), { level: 'info', message: 'upstream token minted', lifetimeSeconds: 3600 })
  t.notMatch(log.lines.join('\n'), token.value)
})

t.test('a hung exchange fails at its own deadline, the back-off counted from there: callers recover within 3 s of the provider\'s return', async (t) => {
  for (const random of [0, 1]) {
    const recovery: Record<string, number> = {}
    for (const fault of ['failing', 'hung'] as const) {
      const endpoint = new FakeEndpoint()
      const { tokens, clock } = manager(endpoint, { random: () => random })
      if (fault === 'failing') endpoint.failing = true
      else endpoint.hold = true
      await Promise.race([tokens.getToken().catch(() => {}), settle()])
      // The provider answers again right after that first exchange; a caller every 100 ms.
      endpoint.failing = false
      endpoint.hold = false
      let recoveredAfter = 0
      while ((await Promise.race([tokens.getToken().then(() => true, () => false), settle().then(() => false)])) === false) {
        clock.advance(100)
        recoveredAfter += 100
      }
      recovery[fault] = recoveredAfter
      t.equal(endpoint.exchanges, 2, `${fault}, random ${random}: one exchange failed (or past its deadline), then one answered`)
      endpoint.release()
    }
    t.equal(recovery.hung, (recovery.failing ?? 0) + EXCHANGE_DEADLINE_MS, `random ${random}: hung ${recovery.hung} ms, failing ${recovery.failing} ms`)
    t.ok((recovery.hung ?? Infinity) <= 3_000)
  }
})

t.test('without a usable token the state stays failing, with its reason, while exchanges hang or fail, until a token is held', async (t) => {
  const endpoint = new FakeEndpoint()
  const { tokens, clock, telemetry } = manager(endpoint)
  endpoint.hold = true
  const first = tokens.getToken()
  t.equal(tokens.state, 'renewing', 'a young exchange is no failure yet')
  t.equal(tokens.failure, undefined)
  clock.advance(EXCHANGE_DEADLINE_MS)
  t.equal(tokens.state, 'failing')
  t.equal(tokens.failure, 'the identity provider has not answered the current exchange')
  await t.rejects(tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED', message: /next attempt in 1 s/ }, 'the next caller is refused at once')
  await t.rejects(first, { code: 'UPSTREAM_AUTH_FAILED', message: /did not answer within/ }, 'its waiters are told')
  t.match(tokens.failure, /did not answer within/)
  t.equal(endpoint.exchanges, 1, 'no exchange during the back-off, counted from the deadline')
  clock.advance(retryDelay(0))
  const retrying = tokens.getToken()
  t.equal(endpoint.exchanges, 2, 'the first caller after the back-off starts the retry')
  t.equal(tokens.state, 'failing', 'still failing while the retry runs')
  endpoint.release()
  t.equal((await retrying).value, 'token-2')
  t.equal(tokens.state, 'held')
  t.equal(tokens.failure, undefined)
  t.same(telemetry.events, ['token:failed', 'token:minted'])
})
