import t from 'tap'
import { CACHE_UNAVAILABLE } from '../../../src/errors.ts'
import type { HealthListener } from '../../../src/redis/health.ts'
import { OwnerLock } from '../../../src/redis/owner-lock.ts'
import { noTelemetry } from '../../../src/telemetry/telemetry.ts'
import { silentLog } from '../../../src/upstream/log.ts'
import { TokenCipher } from '../../../src/upstream/token-cipher.ts'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import { RedisTokenStore, sharedTokenKey } from '../../../src/upstream/token-store.ts'
import { Clock, eventually, FakeEndpoint, type TestContext, testLayer, testRedis } from '../../helper.ts'

// Redis going away and coming back, as each instance's health sees it (set by the test), on the shared Redis.

const SECRET = 'client-secret'
const LIFETIME_MS = 3_600_000

/** An instance's view of Redis, which the test takes down and brings back (its listeners told, as the layer's are). */
function switchableHealth () {
  const listeners = new Set<HealthListener>()
  const health = {
    up: true,
    listen: (listener: HealthListener) => { listeners.add(listener) },
    run: async <T>(command: () => Promise<T>): Promise<T> => {
      if (!health.up) throw new CACHE_UNAVAILABLE('redis is down')
      return await command()
    },
    set: (up: boolean) => {
      health.up = up
      for (const listener of listeners) listener(up)
    }
  }
  return health
}

/** Instances sharing one Redis and one clock, each with its own identity-provider client and view of Redis. */
async function fleet (t: TestContext, names: string[]) {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const instance = async (name: string) => {
    const health = switchableHealth()
    const { bus } = await testLayer(t, redis, prefix)
    const lock = new OwnerLock({ redis, health, bus, ttlMs: 1_000, onError: () => {} })
    const store = new RedisTokenStore({ redis, health, lock, cipher: new TokenCipher(SECRET), keyPrefix: prefix, log: silentLog, now: clock.now })
    const endpoint = new FakeEndpoint(LIFETIME_MS, name)
    const tokens = new TokenManager({ endpoint, store, telemetry: noTelemetry, log: silentLog, lockWaitMs: 10_000, now: clock.now })
    return { health, store, endpoint, tokens }
  }
  const instances = await Promise.all(names.map(instance))
  const exchanges = (): number => instances.reduce((sum, { endpoint }) => sum + endpoint.exchanges, 0)
  return { redis, key: sharedTokenKey(prefix, new TokenCipher(SECRET)), clock, instances, instance, exchanges }
}

t.test('a renewal due while Redis is away waits for it while the held token is usable: then one exchange for the deployment', async (t) => {
  const { redis, key, clock, instances, exchanges } = await fleet(t, ['a', 'b', 'c'])
  const values = async (): Promise<string[]> => await Promise.all(instances.map(async ({ tokens }) => (await tokens.getToken()).value))
  t.same(await values(), ['a-1', 'a-1', 'a-1'])
  const settled = async (): Promise<void> => { await eventually(() => instances.every(({ tokens }) => tokens.state === 'held'), 'renewals settled') }

  // 20 s before expiry: past its renewal (30 s before), usable for 15 s more.
  clock.advance(LIFETIME_MS - 20_000)
  await redis.pexpire(key, 20_000) // Redis's own time, moved as the clock was
  for (const { health } of instances) health.set(false)
  t.same(await values(), ['a-1', 'a-1', 'a-1'], 'the held token serves')
  await settled()
  clock.advance(1_000)
  t.same(await values(), ['a-1', 'a-1', 'a-1'], 'and again, a second later')
  await settled()
  t.equal(exchanges(), 1, 'no instance exchanges alone while its token is usable')

  for (const { health } of instances) health.set(true)
  clock.advance(1_000)
  await eventually(async () => {
    const renewed = await values()
    return new Set(renewed).size === 1 && renewed[0] !== 'a-1'
  }, 'the renewal shared')
  t.equal(exchanges(), 2, 'Redis back: one instance renewed for the deployment')

  // Past the renewed token's last usable moment, Redis away: each instance exchanges for itself, nobody waits.
  clock.advance(LIFETIME_MS - 2_000)
  for (const { health } of instances) health.set(false)
  t.equal(new Set(await values()).size, 3, 'each instance has a token of its own at once')
  t.equal(exchanges(), 5)
})
t.test('Redis back without the token (restarted empty): an instance holding it writes it back, never over a newer one', async (t) => {
  const { redis, key, clock, instances, instance, exchanges } = await fleet(t, ['a', 'b'])
  t.same(await Promise.all(instances.map(async ({ tokens }) => (await tokens.getToken()).value)), ['a-1', 'a-1'])

  for (const { health } of instances) health.set(false)
  await redis.del(key)
  for (const { health } of instances) health.set(true)
  await eventually(async () => await redis.exists(key) === 1, 'the token written back')
  const started = await instance('started')
  t.equal((await started.tokens.getToken()).value, 'a-1', 'an instance started then adopts it')
  t.equal(exchanges(), 1, 'one exchange for the deployment')

  // Another instance renewed meanwhile (its token in Redis): a return of Redis does not put the older one back.
  const [a] = instances
  a?.health.set(false)
  await started.store.write({ value: 'newer', issuedAt: clock.now(), expiresAt: clock.now() + LIFETIME_MS })
  a?.health.set(true)
  const late = await instance('late')
  t.equal((await late.tokens.getToken()).value, 'newer', 'the newer token is the one adopted')
  t.equal(exchanges(), 1, 'still one exchange')
})

t.test('a renewal put off past half the way to the token\'s last usable moment is made alone, in the background: nobody waits for it', async (t) => {
  const { redis, key, clock, instances, exchanges } = await fleet(t, ['a', 'b'])
  const values = async (): Promise<string[]> => await Promise.all(instances.map(async ({ tokens }) => (await tokens.getToken()).value))
  t.same(await values(), ['a-1', 'a-1'])
  // Renewal due 30 s before expiry, last usable 5 s before: put off until 17.5 s before, Redis away (or refusing writes).
  clock.advance(LIFETIME_MS - 20_000)
  await redis.pexpire(key, 20_000)
  for (const { health } of instances) health.set(false)
  t.same(await values(), ['a-1', 'a-1'])
  t.equal(exchanges(), 1, 'put off')
  clock.advance(3_000)
  t.same(await values(), ['a-1', 'a-1'], 'the held token still serves at once')
  await eventually(() => instances.every(({ tokens }) => tokens.state === 'held') && exchanges() === 3, 'each renewed alone')
  t.same(await values(), ['a-2', 'b-1'], 'each instance has renewed its own')
})
