import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { EXCHANGE_DEADLINE_MS } from '../../../src/upstream/token-timing.ts'
import { anotherApp, Clock, eventually, gate, rawRedis, REDIS_URL, stack, tally, type TestContext, tokenKeyOf, untilRedisReady } from '../../helper.ts'

// Instances on one Redis, the identity provider slow or failing once: once one instance stored the token, the others
// serve it to their next callers. Until 2026-12 they refused them for up to 1.5 s more, from the back-off they had
// taken from the store's failure window (3 instances, a caller every 50 ms: 12 to 15 502s after the token was shared).

/** Bounds the wait for the bus (a real socket) before the next callers are asked: without the news they would refuse. */
const TOLD_WITHIN_MS = 2_000

/** `count` instances on one Redis and one clock (it stands still unless moved); their token requests pass `auth`, which the test holds. */
async function fleet (t: TestContext, count: number, tokenTtlSeconds = 3600) {
  const clock = new Clock()
  const auth = await gate(t)
  const { app, sim, config } = await stack(t, {
    env: { RATE_LIMIT_PER_MINUTE: '0', REDIS_URL, AUTH_URL: auth.url }, sim: { tokenTtlSeconds, now: clock.now }, now: clock.now
  })
  auth.target = sim.authUrl
  const apps = [app]
  for (let i = 1; i < count; i++) apps.push(await anotherApp(t, config, clock.now))
  await Promise.all(apps.map(async (one) => { await untilRedisReady(one, count) }))
  const key = tokenKeyOf(config)
  const redis = rawRedis(t)
  /** Resolves once every other instance heard that a token was stored (its own listeners ran before this one), or after TOLD_WITHIN_MS. */
  const told = (others: FastifyInstance[]): Promise<unknown> => Promise.race([sleep(TOLD_WITHIN_MS), Promise.all(others.map(async (other) => {
    await new Promise<void>((resolve) => { other.redisLayer?.bus.listen((event) => { if (event.type === 'filled' && event.key === key) resolve() }) })
  }))])
  const ask = async (apps: FastifyInstance[], name: string) => await Promise.all(apps.map(async (one, i) => await one.inject(`/profile/${name}-${i}`)))
  return { apps, sim, clock, auth, redis, key, told, ask }
}

for (const count of [2, 3]) {
  t.test(`${count} instances, an identity provider answering after the exchange's deadline: once the token is stored, every instance's next caller is served with it`, async (t) => {
    const { apps, sim, clock, auth, redis, key, told, ask } = await fleet(t, count)
    const [exchanger, ...others] = apps as [FastifyInstance, ...FastifyInstance[]]
    auth.hold()
    const first = exchanger.inject('/profile/first')
    await eventually(() => auth.held() === 1, 'the exchange reached the identity provider')
    const waiting = ask(others, 'waiting')
    await eventually(() => others.every((other) => other.tokens.state === 'renewing'), 'the others waiting for its exchange')
    clock.advance(EXCHANGE_DEADLINE_MS)
    t.match((await exchanger.inject('/profile/overdue')).json(), { code: 'UPSTREAM_AUTH_FAILED' }, 'refused once the exchange is past its deadline')
    t.equal((await first).statusCode, 502)
    await eventually(async () => await redis.pttl(`${key}:failing`) > 0, 'the failure shared')
    t.same(tally(await waiting), { '502 UPSTREAM_AUTH_FAILED': count - 1 }, 'the others\' waiting callers told of the failure')
    t.same(tally(await ask(others, 'during')), { '502 UPSTREAM_AUTH_FAILED': count - 1 }, 'and their next ones refused at once')

    const news = told(others)
    auth.release()
    await eventually(async () => await redis.exists(key) === 1, 'the late answer stored')
    await news
    t.same(tally(await ask(others, 'after')), { 200: count - 1 }, 'every other instance\'s next caller served, the clock still within their back-off')
    t.equal((await exchanger.inject('/profile/after')).statusCode, 200)
    t.equal(await redis.exists(`${key}:failing`), 0, 'the failure window ended with the write')
    t.equal(sim.stats.tokenRequests, 1, 'one exchange for the deployment')
    t.equal(sim.stats.tokensIssued, 1)
  })

  t.test(`${count} instances, an identity provider failing once then answering: once the retry's token is stored, every instance's next caller is served with it`, async (t) => {
    const { apps, sim, clock, auth, redis, key, told, ask } = await fleet(t, count)
    sim.failTokenNext({ kind: 'status', status: 500 })
    auth.hold()
    const asked = ask(apps, 'first')
    await eventually(() => auth.held() === 1 && apps.every((one) => one.tokens.state === 'renewing'), 'one exchange, every instance waiting for it')
    auth.release()
    t.same(tally(await asked), { '502 UPSTREAM_AUTH_FAILED': count }, 'the failure told to every instance\'s caller')
    t.equal(sim.stats.tokenRequests, 1)

    // The back-off runs out: its key expires in Redis, each instance's own on its clock.
    await redis.del(`${key}:failing`)
    clock.advance(1_500)
    const [retrier, ...others] = apps as [FastifyInstance, ...FastifyInstance[]]
    auth.hold()
    const retry = retrier.inject('/profile/retry')
    await eventually(() => auth.held() === 1, 'the retry reached the identity provider')
    t.same(tally(await ask(others, 'during')), { '502 UPSTREAM_AUTH_FAILED': count - 1 }, 'the others refuse at once while the retry runs')

    const news = told(others)
    auth.release()
    t.equal((await retry).statusCode, 200, 'the retry\'s caller served')
    await news
    t.same(tally(await ask(others, 'after')), { 200: count - 1 }, 'every other instance\'s next caller served, the clock still within their back-off')
    t.equal(await redis.exists(`${key}:failing`), 0, 'the retry\'s window ended with the write')
    t.equal(sim.stats.tokenRequests, 2, 'the failed exchange and its one retry')
    t.equal(sim.stats.tokensIssued, 1)
  })

  t.test(`${count} instances, a renewal answered after its deadline: the others take the new token before theirs stops being sent`, async (t) => {
    // A 20 s token: renewed from 16 s (80%), sent until 18 s (90%).
    const { apps, sim, clock, auth, redis, key, told, ask } = await fleet(t, count, 20)
    t.same(tally(await ask(apps, 'warm')), { 200: count })
    const [renewer, ...others] = apps as [FastifyInstance, ...FastifyInstance[]]
    clock.advance(16_500)
    auth.hold()
    t.equal((await renewer.inject('/profile/renewing')).statusCode, 200, 'served with the held token while it renews')
    await eventually(() => auth.held() === 1, 'the renewal reached the identity provider')
    t.same(tally(await ask(others, 'renewing')), { 200: count - 1 })
    clock.advance(EXCHANGE_DEADLINE_MS)
    t.equal((await renewer.inject('/profile/overdue')).statusCode, 200, 'the held token still serves past the renewal\'s deadline')
    await eventually(async () => await redis.pttl(`${key}:failing`) > 0, 'the failure shared')
    await eventually(() => others.every((other) => other.tokens.state === 'held'), 'the others\' renewals given up')

    const first = await redis.get(key)
    const news = told(others)
    auth.release()
    await eventually(async () => await redis.get(key) !== first, 'the new token stored')
    await news
    // 18.1 s: the first token is no longer sent; the others' back-off, taken at 17.5 s for at least 1 s less a Redis step, still runs.
    clock.advance(600)
    t.same(tally(await ask(apps, 'after')), { 200: count }, 'every instance\'s next caller served with the new token')
    t.equal(sim.stats.tokenRequests, 2, 'the first token and one renewal')
    t.equal(sim.stats.tokensIssued, 2)
    t.equal(sim.stats.expiredTokensSeen, 0)
  })
}
