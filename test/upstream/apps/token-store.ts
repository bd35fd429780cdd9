import t from 'tap'
import type { Redis } from 'ioredis'
import { noTelemetry } from '../../../src/telemetry/telemetry.ts'
import { silentLog } from '../../../src/upstream/log.ts'
import { TokenCipher } from '../../../src/upstream/token-cipher.ts'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import { RedisTokenStore, sharedTokenKey } from '../../../src/upstream/token-store.ts'
import type { RedisLayer } from '../../../src/redis/layer.ts'
import { Clock, deadRedis, eventually, FakeEndpoint, type TestContext, testLayer, testRedis } from '../../helper.ts'

const SECRET = 'client-secret'
const tokenKey = (prefix: string): string => sharedTokenKey(prefix, new TokenCipher(SECRET))

function store ({ client, health, lock }: RedisLayer, prefix: string): RedisTokenStore {
  return new RedisTokenStore({ redis: client, health, lock, cipher: new TokenCipher(SECRET), keyPrefix: prefix, log: silentLog })
}

/** One instance: its own identity-provider client and Redis layer, the shared store. */
async function instance (t: TestContext, redis: Redis, prefix: string, name = 'token', lockTtlMs?: number, now?: () => number) {
  const endpoint = new FakeEndpoint(3_600_000, name)
  const layer = await testLayer(t, redis, prefix, lockTtlMs)
  const tokens = new TokenManager({ endpoint, store: store(layer, prefix), telemetry: noTelemetry, log: silentLog, lockWaitMs: 10_000, ...(now !== undefined && { now }) })
  return { endpoint, tokens, layer }
}

t.test('instances on one Redis exchange once between them; the stored value is not the token', async (t) => {
  const { redis, prefix } = testRedis(t)
  const instances = [await instance(t, redis, prefix), await instance(t, redis, prefix), await instance(t, redis, prefix)]
  const got = await Promise.all(instances.flatMap(({ tokens }) => Array.from({ length: 50 }, async () => await tokens.getToken())))
  t.equal(instances.reduce((sum, { endpoint }) => sum + endpoint.exchanges, 0), 1)
  t.equal(new Set(got.map((token) => token.value)).size, 1)

  const stored = await redis.get(tokenKey(prefix))
  t.type(stored, 'string')
  t.notMatch(stored, 'token-1')
  t.notMatch(Buffer.from(stored ?? '', 'base64url').toString('latin1'), 'token-1')
  const ttl = await redis.pttl(tokenKey(prefix))
  t.ok(ttl > 3_590_000 && ttl <= 3_600_000, 'kept in Redis for the token\'s lifetime')

  const late = await instance(t, redis, prefix)
  t.equal((await late.tokens.getToken()).value, got[0]?.value)
  t.equal(late.endpoint.exchanges, 0, 'a later instance adopts the shared token')
})

t.test('a token the upstream refused is never adopted again; the renewed one is shared', async (t) => {
  const { redis, prefix } = testRedis(t)
  const a = await instance(t, redis, prefix, 'a')
  const b = await instance(t, redis, prefix, 'b')
  const first = await a.tokens.getToken()
  t.equal((await b.tokens.getToken()).value, 'a-1')
  b.tokens.invalidate(first)
  t.equal((await b.tokens.getToken()).value, 'b-1', 'b renews')
  t.equal(b.endpoint.exchanges, 1)
  a.tokens.invalidate(first)
  t.equal((await a.tokens.getToken()).value, 'b-1', "a adopts b's renewal")
  t.equal(a.endpoint.exchanges, 1, 'a exchanged only the first time')
})

t.test('one instance\'s failed exchange makes the others fail fast, without an exchange of their own', async (t) => {
  const { redis, prefix } = testRedis(t)
  const a = await instance(t, redis, prefix)
  const b = await instance(t, redis, prefix)
  a.endpoint.failing = true
  await t.rejects(a.tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED' })
  await t.rejects(b.tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED', message: /next attempt in/ })
  t.equal(b.endpoint.exchanges, 0)
  t.equal(b.tokens.state, 'failing')
  t.ok(await redis.pttl(`${tokenKey(prefix)}:failing`) > 0)
})

t.test('a failing identity provider gets one exchange per failure window from the whole deployment, then one to recover', async (t) => {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const instances = await Promise.all(['a', 'b', 'c'].map(async (name) => await instance(t, redis, prefix, name, undefined, clock.now)))
  const exchanges = (): number => instances.reduce((sum, { endpoint }) => sum + endpoint.exchanges, 0)
  const askEverywhere = async (): Promise<unknown[]> => await Promise.all(instances.flatMap(({ tokens }) =>
    Array.from({ length: 20 }, async () => await tokens.getToken().catch((error: unknown) => error))))
  for (const { endpoint } of instances) endpoint.failing = true

  for (let window = 1; window <= 5; window++) {
    const answers = await askEverywhere()
    t.ok(answers.every((answer) => answer instanceof Error), `window ${window}: every caller fails fast`)
    t.equal(exchanges(), window, `window ${window}: one exchange between the three instances`)
    const left = await redis.pttl(`${tokenKey(prefix)}:failing`)
    // Redis's own time runs: what is left of a 1 to 1.5 s window after the callers above (on a busy machine, far less).
    t.ok(left > 0 && left <= 5_000, `window ${window}: the shared window is set, for at most 5 s (${left} ms left)`)
    t.same(await askEverywhere().then(() => exchanges()), window, 'callers during the window cost no exchange')
    // The window runs out: its key expires in Redis, each instance's own back-off on its clock.
    await redis.del(`${tokenKey(prefix)}:failing`)
    clock.advance(5_000)
  }

  for (const { endpoint } of instances) endpoint.failing = false
  const answers = await askEverywhere()
  t.equal(answers.filter((answer) => !(answer instanceof Error)).length, 3,
    'the caller that starts the retry on each instance gets a token; the others, arriving while it runs, are refused at once')
  t.ok((await askEverywhere()).every((answer) => !(answer instanceof Error)), 'every caller after it gets the token')
  t.equal(exchanges(), 6, 'with one exchange for the deployment')
})

t.test('an instance waiting for another\'s exchange adopts its token though the release event was lost (fleet simulation seed 19)', async (t) => {
  const { redis, prefix } = testRedis(t)
  const owner = await instance(t, redis, prefix, 'owner')
  // The waiter's events come on another channel: it never hears the owner's release, as with the bus down.
  const endpoint = new FakeEndpoint(3_600_000, 'waiter')
  const waiterStore = store(await testLayer(t, redis, `${prefix}deaf:`, 10_000), prefix)
  const claims: Array<boolean | undefined> = []
  const claim = waiterStore.claim.bind(waiterStore)
  waiterStore.claim = async () => await claim().then((made) => { claims.push(made?.owner); return made })
  const waiter = new TokenManager({ endpoint, store: waiterStore, telemetry: noTelemetry, log: silentLog, lockWaitMs: 10_000 })
  owner.endpoint.hold = true
  const owners = owner.tokens.getToken()
  await eventually(async () => await redis.exists(`${tokenKey(prefix)}:lock`) === 1, 'the owner exchanging')
  const waiting = waiter.getToken()
  await eventually(() => claims.includes(false), 'the waiter waiting for the owner\'s exchange')
  owner.endpoint.release()
  t.equal((await owners).value, 'owner-1')
  t.equal((await waiting).value, 'owner-1', 'adopted within the exchange\'s deadline, not refused at it')
  t.equal(endpoint.exchanges, 0)
})

t.test('the lock is released only by its owner', async (t) => {
  const { redis, prefix } = testRedis(t)
  const a = store(await testLayer(t, redis, prefix), prefix)
  const b = store(await testLayer(t, redis, prefix), prefix)
  const owner = await a.claim()
  t.equal(owner?.owner, true)
  const waiter = await b.claim()
  t.equal(waiter?.owner, false, 'held')
  await redis.set(`${tokenKey(prefix)}:lock`, 'somebody-else', 'KEEPTTL', 'XX')
  if (owner?.owner === true) await owner.release()
  t.equal(await redis.get(`${tokenKey(prefix)}:lock`), 'somebody-else', 'a release frees only its own lock')
  await redis.del(`${tokenKey(prefix)}:lock`)
  t.equal((await b.claim())?.owner, true, 'free again')
})

t.test('a lock left by a crashed owner expires, then one waiting instance exchanges', async (t) => {
  const { redis, prefix } = testRedis(t)
  const waiting = await instance(t, redis, prefix, 'token', 300)
  await redis.set(`${tokenKey(prefix)}:lock`, 'crashed-instance', 'PX', 300)
  t.equal((await waiting.tokens.getToken()).value, 'token-1')
  t.equal(waiting.endpoint.exchanges, 1)
})

t.test('a value sealed with another secret is ignored', async (t) => {
  const { redis, prefix } = testRedis(t)
  // Under this secret's key, as a value sealed with another would never be written.
  await redis.set(tokenKey(prefix), new TokenCipher('old-secret').seal('{"value":"x","lifetimeMs":1}', tokenKey(prefix)), 'PX', 60_000)
  t.equal(await store(await testLayer(t, redis, prefix), prefix).read(), undefined)
})

t.test('without Redis each instance keeps working on its own', async (t) => {
  const redis = deadRedis(t)
  const { endpoint, tokens } = await instance(t, redis, 'unused:')
  t.equal((await tokens.getToken()).value, 'token-1')
  t.equal(endpoint.exchanges, 1)
})

t.test('instances holding another secret (a rotation under way, a pod misconfigured) share neither the token nor the failures', async (t) => {
  const { redis, prefix } = testRedis(t)
  const withSecret = async (secret: string, name: string) => {
    const endpoint = new FakeEndpoint(3_600_000, name)
    const layer = await testLayer(t, redis, prefix)
    const cipher = new TokenCipher(secret)
    const store = new RedisTokenStore({ redis: layer.client, health: layer.health, lock: layer.lock, cipher, keyPrefix: prefix, log: silentLog })
    return { endpoint, tokens: new TokenManager({ endpoint, store, telemetry: noTelemetry, log: silentLog, lockWaitMs: 10_000 }) }
  }
  const old = await withSecret('old-secret', 'old')
  t.equal((await old.tokens.getToken()).value, 'old-1')
  const current = await withSecret(SECRET, 'current')
  t.equal((await current.tokens.getToken()).value, 'current-1', 'the other secret\'s token is not this one\'s')
  const laterOld = await withSecret('old-secret', 'later-old')
  t.equal((await laterOld.tokens.getToken()).value, 'old-1', 'each secret keeps its own token: not overwritten by the other')
  t.equal(laterOld.endpoint.exchanges, 0)

  const misconfigured = await withSecret('wrong-secret', 'wrong')
  misconfigured.endpoint.failing = true
  await t.rejects(misconfigured.tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED' })
  const laterCurrent = await withSecret(SECRET, 'later-current')
  t.equal((await laterCurrent.tokens.getToken()).value, 'current-1', 'another secret\'s failures refuse nobody here')
  t.equal(laterCurrent.endpoint.exchanges, 0)
})
