import t from 'tap'
import { PROFILE_FIELDS } from '../../src/schemas/profile.ts'
import { profileOf, timelineOf } from '../../dev/profiles.ts'
import { stack } from '../helper.ts'

t.test('GET /profile/:username answers the upstream profile with ten string fields', async (t) => {
  const { app, sim } = await stack(t)
  const res = await app.inject('/profile/alice')
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  const body = res.json()
  t.same(body, { user: profileOf('alice') })
  t.same(Object.keys(body.user).sort(), [...PROFILE_FIELDS].sort())
  t.equal(sim.callsFor('profile', 'alice'), 1)
})

t.test('GET /profile/:username/timeline answers the posts in upstream order', async (t) => {
  const { app, sim } = await stack(t)
  const res = await app.inject('/profile/alice/timeline')
  t.equal(res.statusCode, 200)
  t.same(res.json(), { posts: timelineOf('alice') })
  t.equal(sim.callsFor('timeline', 'alice'), 1)
})

t.test('GET /user/:username?query= answers exactly one key, matched case-insensitively', async (t) => {
  const { app } = await stack(t)
  const profile = profileOf('bob')
  for (const query of ['credits', 'Credits', 'CREDITS']) {
    const res = await app.inject(`/user/bob?query=${query}`)
    t.equal(res.statusCode, 200, query)
    t.same(res.json(), { Credits: profile.Credits }, query)
  }
  for (const field of PROFILE_FIELDS) {
    const res = await app.inject(`/user/bob?query=${field.toLowerCase()}`)
    t.same(res.json(), { [field]: profile[field] }, field)
  }
})

t.test('a username travels percent-encoded as one path segment', async (t) => {
  const { app, sim } = await stack(t)
  const username = 'a/b?c#d é%'
  const res = await app.inject(`/profile/${encodeURIComponent(username)}`)
  t.equal(res.statusCode, 200)
  t.same(res.json(), { user: profileOf(username) })
  t.equal(sim.stats.lastPath, `/profile/${encodeURIComponent(username)}`)
  t.equal(sim.callsFor('profile', username), 1)
})

t.test('usernames of exactly 128 code points are valid, emoji included', async (t) => {
  const { app } = await stack(t)
  for (const username of ['x'.repeat(128), '😀'.repeat(128)]) {
    const res = await app.inject(`/profile/${encodeURIComponent(username)}`)
    t.equal(res.statusCode, 200, `${username.length} UTF-16 units`)
  }
})

t.test('an unknown member answers 404 PROFILE_NOT_FOUND', async (t) => {
  const { app } = await stack(t)
  for (const url of ['/profile/ghost-1', '/profile/ghost-1/timeline', '/user/ghost-1?query=name']) {
    const res = await app.inject(url)
    t.equal(res.statusCode, 404, url)
    t.same(res.json(), { statusCode: 404, code: 'PROFILE_NOT_FOUND', error: 'Not Found', message: 'No profile for username ghost-1' }, url)
  }
})

t.test('an upstream base URL with a path keeps the path', async (t) => {
  const { app, sim } = await stack(t, { sim: { basePath: '/gw/v1' } })
  t.equal(sim.baseUrl.endsWith('/gw/v1'), true)
  const res = await app.inject('/profile/carol')
  t.equal(res.statusCode, 200)
  t.equal(sim.stats.lastPath, '/gw/v1/profile/carol')
})
