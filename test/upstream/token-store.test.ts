import t from 'tap'
import { noTelemetry } from '../../src/telemetry.js'
import { silentLog } from '../../src/upstream/log.js'
import { TokenCipher } from '../../src/upstream/token-cipher.js'
import { TokenManager } from '../../src/upstream/token-manager.js'
import { RedisTokenStore } from '../../src/upstream/token-store.js'
import type { SharedRedis } from '../../src/upstream/shared-redis.js'
import { FakeEndpoint } from './fakes.js'
import { deadRedis, testRedis } from './redis-fixture.js'

const SECRET = 'client-secret'

function store (redis: SharedRedis, prefix: string, lockTtlMs = 5_000): RedisTokenStore {
  return new RedisTokenStore({ redis, cipher: new TokenCipher(SECRET), keyPrefix: prefix, lockTtlMs, log: silentLog })
}

/** One instance: its own identity-provider client, the shared store. */
function instance (redis: SharedRedis, prefix: string, name = 'token', lockTtlMs?: number) {
  const endpoint = new FakeEndpoint(3_600_000, name)
  const tokens = new TokenManager({ endpoint, store: store(redis, prefix, lockTtlMs), telemetry: noTelemetry, log: silentLog, lockWaitMs: 10_000 })
  return { endpoint, tokens }
}

t.test('instances on one Redis exchange once between them; the stored value is not the token', async (t) => {
  const { redis, prefix } = testRedis(t)
  const instances = [instance(redis, prefix), instance(redis, prefix), instance(redis, prefix)]
  const got = await Promise.all(instances.flatMap(({ tokens }) => Array.from({ length: 50 }, async () => await tokens.getToken())))
  t.equal(instances.reduce((sum, { endpoint }) => sum + endpoint.exchanges, 0), 1)
  t.equal(new Set(got.map((token) => token.value)).size, 1)

  const stored = await redis.get(`${prefix}token`)
  t.type(stored, 'string')
  t.notMatch(stored, 'token-1')
  t.notMatch(Buffer.from(stored ?? '', 'base64url').toString('latin1'), 'token-1')
  const ttl = await redis.pttl(`${prefix}token`)
  t.ok(ttl > 3_590_000 && ttl <= 3_600_000, 'kept in Redis for the token\'s lifetime')

  const late = instance(redis, prefix)
  t.equal((await late.tokens.getToken()).value, got[0]?.value)
  t.equal(late.endpoint.exchanges, 0, 'a later instance adopts the shared token')
})

t.test('a token the upstream refused is never adopted again; the renewed one is shared', async (t) => {
  const { redis, prefix } = testRedis(t)
  const a = instance(redis, prefix, 'a')
  const b = instance(redis, prefix, 'b')
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
  const a = instance(redis, prefix)
  const b = instance(redis, prefix)
  a.endpoint.failing = true
  await t.rejects(a.tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED' })
  await t.rejects(b.tokens.getToken(), { code: 'UPSTREAM_AUTH_FAILED', message: /next attempt in/ })
  t.equal(b.endpoint.exchanges, 0)
  t.equal(b.tokens.state, 'failing')
  t.ok(await redis.pttl(`${prefix}token:failing`) > 0)
})

t.test('the lock is released only by its owner', async (t) => {
  const { redis, prefix } = testRedis(t)
  const s = store(redis, prefix)
  const owner = await s.tryLock()
  t.type(owner, 'string')
  t.equal(await s.tryLock(), undefined, 'held')
  await s.unlock('somebody-else')
  t.equal(await s.tryLock(), undefined, 'still held')
  await s.unlock(owner ?? '')
  t.type(await s.tryLock(), 'string', 'free again')
})

t.test('a lock left by a crashed owner expires, then one waiting instance exchanges', async (t) => {
  const { redis, prefix } = testRedis(t)
  await redis.set(`${prefix}token:lock`, 'crashed-instance', 'PX', 300)
  const waiting = instance(redis, prefix, 'token', 300)
  t.equal((await waiting.tokens.getToken()).value, 'token-1')
  t.equal(waiting.endpoint.exchanges, 1)
})

t.test('a value sealed with another secret is ignored', async (t) => {
  const { redis, prefix } = testRedis(t)
  await redis.set(`${prefix}token`, new TokenCipher('old-secret').seal('{"value":"x","lifetimeMs":1}', `${prefix}token`), 'PX', 60_000)
  t.equal(await store(redis, prefix).read(), undefined)
})

t.test('without Redis each instance keeps working on its own', async (t) => {
  const redis = deadRedis(t)
  const { endpoint, tokens } = instance(redis, 'unused:')
  t.equal((await tokens.getToken()).value, 'token-1')
  t.equal(endpoint.exchanges, 1)
})
