import t from 'tap'
import { profileOf } from '../../../dev/profiles.ts'
import { cacheStack, eventually, rawRedis } from '../../helper.ts'

t.test('a current ETag in If-None-Match answers 304 with no body and the caching headers', async (t) => {
  const { app, clock } = await cacheStack(t)
  const first = await app.inject('/profile/alice')
  const etag = String(first.headers.etag)
  t.match(etag, /^"[\w-]+"$/)
  clock.advance(5_000)
  for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
    const res = await app.inject({ url: '/profile/alice', headers: { 'if-none-match': header } })
    t.equal(res.statusCode, 304, header)
    t.equal(res.body, '', header)
    t.equal(res.headers.etag, etag)
    t.equal(res.headers['x-cache'], 'HIT')
    t.equal(res.headers.age, '5')
    t.match(res.headers['cache-control'], /^public, max-age=(\d+), stale-while-revalidate=\d+, stale-if-error=86400$/)
  }
  const other = await app.inject({ url: '/profile/alice', headers: { 'if-none-match': '"something-else"' } })
  t.equal(other.statusCode, 200)
  t.same(other.json(), { user: profileOf('alice') })
})

t.test('a tag of another URL is no match, even though it is a tag this service issued', async (t) => {
  const { app } = await cacheStack(t)
  await app.inject('/profile/alice')
  const timeline = await app.inject('/profile/alice/timeline')
  const bob = await app.inject('/profile/bob')
  for (const etag of [timeline.headers.etag, bob.headers.etag]) {
    const res = await app.inject({ url: '/profile/alice', headers: { 'if-none-match': String(etag) } })
    t.equal(res.statusCode, 200)
    t.same(res.json(), { user: profileOf('alice') })
  }
})

t.test('after a revalidation changed the body, the old tag gets the new body; after a purge the tag is checked and revalidated', async (t) => {
  const { app, sim, clock, config } = await cacheStack(t, { env: { ADMIN_TOKEN: 'admin-token' } })
  const redis = rawRedis(t)
  const current = await app.inject('/profile/alice')
  const key = `${config.CACHE_KEY_PREFIX}v1:{alice}:profile`
  // An older version of the profile, stale now: what the store held before the member edited it.
  await redis.hset(key, 'b', JSON.stringify({ user: { ...profileOf('alice'), about: 'before the edit' } }), 'e', '"old-version"', 'f', String(clock.now() - 1))
  clock.advance(3_000) // past the in-process tier's copy, which nothing told about this write
  const stale = await app.inject({ url: '/profile/alice', headers: { 'if-none-match': '"old-version"' } })
  t.equal(stale.statusCode, 304, 'the old version is still the one served (STALE)')
  t.equal(stale.headers['x-cache'], 'STALE')
  await eventually(async () => (await app.inject('/profile/alice')).headers['x-cache'] === 'HIT', 'revalidated')
  t.equal(sim.callsFor('profile', 'alice'), 2, 'a conditional request reaches the cache and revalidates')

  const changed = await app.inject({ url: '/profile/alice', headers: { 'if-none-match': '"old-version"' } })
  t.equal(changed.statusCode, 200)
  t.same(changed.json(), { user: profileOf('alice') })
  t.equal(changed.headers.etag, current.headers.etag)

  await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: { authorization: 'Bearer admin-token' } })
  const purged = await app.inject({ url: '/profile/alice', headers: { 'if-none-match': String(current.headers.etag) } })
  t.equal(purged.statusCode, 304, 'the purged version is unchanged: the tag still matches')
  t.equal(purged.headers['x-cache'], 'STALE')
  t.match(purged.headers['cache-control'], /^public, max-age=0, stale-while-revalidate=0, stale-if-error=\d+$/)
  await eventually(() => sim.callsFor('profile', 'alice') === 3, 'revalidated after the purge')
})

t.test('If-None-Match does not turn a negative entry into a 304', async (t) => {
  const { app } = await cacheStack(t)
  await app.inject('/profile/ghost-6')
  const res = await app.inject({ url: '/profile/ghost-6', headers: { 'if-none-match': '*' } })
  t.equal(res.statusCode, 404)
  t.equal(res.json().code, 'PROFILE_NOT_FOUND')
})
