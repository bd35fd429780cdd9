import t from 'tap'
import { profileOf } from '../../../dev/profiles.ts'
import { cacheStack, eventually, rawRedis } from '../../helper.ts'

/** The X-Cache, Cache-Control numbers and Age of an answer. */
function caching (res: { headers: Record<string, unknown> }): {
  xCache: unknown, maxAge: number, swr: number | undefined, sie: number | undefined, age: number | undefined
} {
  const cacheControl = String(res.headers['cache-control'])
  const number = (name: string): number | undefined => {
    const match = new RegExp(`${name}=(\\d+)`).exec(cacheControl)
    return match?.[1] === undefined ? undefined : Number(match[1])
  }
  const age = res.headers.age
  return {
    xCache: res.headers['x-cache'],
    maxAge: number('max-age') ?? -1,
    swr: number('stale-while-revalidate'),
    sie: number('stale-if-error'),
    age: age === undefined ? undefined : Number(age)
  }
}

for (const store of ['redis', 'memory'] as const) {
  const env: Record<string, string> = store === 'redis' ? {} : { REDIS_URL: '' }

  t.test(`${store}: missing -> fresh -> stale (served, revalidated once) -> fresh -> expired, calls counted`, async (t) => {
    const { app, sim, clock } = await cacheStack(t, { env })
    const body = { user: profileOf('alice') }

    const miss = await app.inject('/profile/alice')
    t.equal(miss.statusCode, 200)
    t.same(miss.json(), body)
    t.match(caching(miss), { xCache: 'MISS', sie: 86400, age: undefined })
    t.ok(caching(miss).maxAge >= 270 && caching(miss).maxAge <= 300, 'max-age: the profile TTL, less at most 10% jitter')
    t.equal(caching(miss).swr, caching(miss).maxAge, 'browsers may serve it stale no longer than its freshness')
    t.equal(sim.callsFor('profile', 'alice'), 1)

    const hit = await app.inject('/profile/alice')
    t.equal(hit.statusCode, 200)
    t.equal(hit.body, miss.body, 'the stored bytes')
    t.match(caching(hit), { xCache: 'HIT', age: 0, maxAge: caching(miss).maxAge })
    t.equal(hit.headers.etag, miss.headers.etag)

    clock.advance(10_000)
    const older = await app.inject('/profile/alice')
    t.match(caching(older), { xCache: 'HIT', age: 10, maxAge: caching(miss).maxAge - 10 })
    t.equal(sim.callsFor('profile', 'alice'), 1, 'fresh: no upstream call')

    clock.advance(300_000)
    const stale = await app.inject('/profile/alice')
    t.equal(stale.statusCode, 200)
    t.equal(stale.body, miss.body, 'stale: the old body, at once')
    t.match(caching(stale), { xCache: 'STALE', maxAge: 0, age: 310 })
    t.ok(caching(stale).sie! > 86000, 'on an origin failure: what is left of the stale window')
    t.equal(caching(stale).swr, caching(miss).maxAge, 'while revalidating: one freshness at most')
    await eventually(async () => (await app.inject('/profile/alice')).headers['x-cache'] === 'HIT', 'revalidated')
    t.equal(sim.callsFor('profile', 'alice'), 2, 'one revalidation however many stale reads')
    const revalidated = await app.inject('/profile/alice')
    t.match(caching(revalidated), { xCache: 'HIT', age: 0 })

    clock.advance((300 + 86400 + 1) * 1000)
    const expired = await app.inject('/profile/alice')
    t.match(caching(expired), { xCache: 'MISS' })
    t.equal(expired.statusCode, 200)
    t.equal(sim.callsFor('profile', 'alice'), 3, 'past the stale window: loaded again')
  })

  t.test(`${store}: a negative entry is remembered, then revalidated, then forgotten`, async (t) => {
    const { app, sim, clock } = await cacheStack(t, { env })
    const expected = { statusCode: 404, code: 'PROFILE_NOT_FOUND', error: 'Not Found', message: 'No profile for username ghost-1' }

    const miss = await app.inject('/profile/ghost-1')
    t.equal(miss.statusCode, 404)
    t.same(miss.json(), expected)
    t.match(caching(miss), { xCache: 'MISS' })
    t.ok(caching(miss).maxAge >= 54 && caching(miss).maxAge <= 60, 'cacheable for NOT_FOUND_TTL_SECONDS')

    clock.advance(20_000)
    const hit = await app.inject('/profile/ghost-1')
    t.equal(hit.statusCode, 404)
    t.same(hit.json(), expected)
    t.match(caching(hit), { xCache: 'HIT', age: 20, maxAge: caching(miss).maxAge - 20 })
    t.equal(sim.callsFor('profile', 'ghost-1'), 1, 'no upstream call while negative-cached')

    clock.advance(41_000)
    const stale = await app.inject('/profile/ghost-1')
    t.equal(stale.statusCode, 404)
    t.match(caching(stale), { xCache: 'STALE', maxAge: 0 })
    await eventually(async () => (await app.inject('/profile/ghost-1')).headers['x-cache'] === 'HIT', 'revalidated')
    t.equal(sim.callsFor('profile', 'ghost-1'), 2)

    clock.advance(121_000)
    const expired = await app.inject('/profile/ghost-1')
    t.match(caching(expired), { xCache: 'MISS' })
    t.equal(sim.callsFor('profile', 'ghost-1'), 3)
  })
}

t.test('redis keys carry the prefix, the schema version and the username\'s hash tag, and expire on their own', async (t) => {
  const { app, config } = await cacheStack(t)
  const redis = rawRedis(t)
  await app.inject('/profile/al%7Bi%7Dce%3A')
  await app.inject('/profile/ghost-2')
  const key = `${config.CACHE_KEY_PREFIX}v1:{al%7Bi%7Dce%3A}:profile`
  // Load locks are released right after the answer.
  await eventually(async () => (await redis.keys(`${config.CACHE_KEY_PREFIX}v1:*:lock`)).length === 0, 'locks released')
  t.same(await redis.keys(`${config.CACHE_KEY_PREFIX}v1:*`).then((keys) => keys.sort()), [key, `${config.CACHE_KEY_PREFIX}v1:{ghost-2}:profile`].sort())
  const ttl = await redis.pttl(key)
  t.ok(ttl > 270_000 + 86_400_000 - 5_000 && ttl <= 300_000 + 86_400_000, 'freshness + stale window')
  const negativeTtl = await redis.pttl(`${config.CACHE_KEY_PREFIX}v1:{ghost-2}:profile`)
  t.ok(negativeTtl > 100_000 && negativeTtl <= 120_000, 'a negative entry: NOT_FOUND_TTL_SECONDS fresh, as long again stale')
})
