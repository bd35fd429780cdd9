import t from 'tap'
import { cacheStack, eventually, gate } from '../../helper.ts'

const ADMIN_TOKEN = 'admin-secret-token-for-tests'
const authorized = { authorization: `Bearer ${ADMIN_TOKEN}` }

t.test('without ADMIN_TOKEN the purge route does not exist', async (t) => {
  const { app } = await cacheStack(t)
  const res = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: authorized })
  t.equal(res.statusCode, 404)
  t.same(res.json(), { statusCode: 404, code: 'NOT_FOUND', error: 'Not Found', message: 'Route POST /admin/purge/alice not found' })
})

t.test('a purge without the right bearer token is 401 UNAUTHORIZED, and purges nothing', async (t) => {
  const { app } = await cacheStack(t, { env: { ADMIN_TOKEN } })
  await app.inject('/profile/alice')
  const attempts: Array<Record<string, string>> = [
    {},
    { authorization: ADMIN_TOKEN },
    { authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}` },
    { authorization: `Bearer ${ADMIN_TOKEN}x` },
    { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` },
    { authorization: 'Bearer ' },
    { authorization: `Bearer ${ADMIN_TOKEN} extra` }
  ]
  for (const headers of attempts) {
    const res = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers })
    t.equal(res.statusCode, 401, JSON.stringify(headers))
    t.same(res.json(), { statusCode: 401, code: 'UNAUTHORIZED', error: 'Unauthorized', message: 'A valid admin bearer token is required' })
    t.equal(res.headers['www-authenticate'], 'Bearer realm="admin"')
    t.equal(res.headers['cache-control'], 'no-store')
    t.notMatch(res.body, ADMIN_TOKEN.slice(0, 10), 'the token is never echoed')
  }
  const invalid = await app.inject({ method: 'POST', url: `/admin/purge/${'x'.repeat(129)}` })
  t.equal(invalid.statusCode, 401, 'the token is checked before anything else')
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'HIT', 'still fresh')
})

t.test('a purge marks the profile, timeline and negative entries stale on every instance; each revalidates once', async (t) => {
  const upstream = await gate(t)
  const { app, sim, another } = await cacheStack(t, { env: { ADMIN_TOKEN }, gate: upstream })
  const second = await another()
  for (const url of ['/profile/alice', '/profile/alice/timeline', '/profile/ghost-5']) {
    await app.inject(url)
    // The second instance now holds them in its in-process tier too.
    t.equal((await second.inject(url)).headers['x-cache'], 'HIT', url)
  }
  // The revalidations are held until the crowd has been answered, however busy the machine: none of it sees them.
  upstream.hold()

  const purge = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: { authorization: `bearer ${ADMIN_TOKEN}` } })
  t.equal(purge.statusCode, 200)
  t.same(purge.json(), { username: 'alice', stale: 2 })
  t.equal(purge.headers['cache-control'], 'no-store')
  const ghost = await app.inject({ method: 'POST', url: '/admin/purge/ghost-5', headers: authorized })
  t.same(ghost.json(), { username: 'ghost-5', stale: 1 })
  const nobody = await app.inject({ method: 'POST', url: '/admin/purge/nobody', headers: authorized })
  t.same(nobody.json(), { username: 'nobody', stale: 0 })

  await eventually(async () => (await second.inject('/profile/alice')).headers['x-cache'] !== 'HIT', 'the purge reached the other instance')
  const crowd = await Promise.all(['/profile/alice', '/profile/alice/timeline', '/profile/ghost-5'].flatMap((url) =>
    [app, second, app, second].map(async (instance) => await instance.inject(url))))
  t.same(new Set(crowd.map((res) => res.headers['x-cache'])), new Set(['STALE']), 'served stale, not deleted')
  t.same(crowd.map((res) => res.statusCode), [200, 200, 200, 200, 200, 200, 200, 200, 404, 404, 404, 404])
  upstream.release()
  for (const [url, kind, username] of [['/profile/alice', 'profile', 'alice'], ['/profile/alice/timeline', 'timeline', 'alice'], ['/profile/ghost-5', 'profile', 'ghost-5']] as const) {
    for (const instance of [app, second]) {
      await eventually(async () => (await instance.inject(url)).headers['x-cache'] === 'HIT', `${url} revalidated`)
    }
    t.equal(sim.callsFor(kind, username), 2, `${url}: one revalidation for the whole deployment`)
  }
})

t.test('with the in-process store, a purge makes the next request STALE', async (t) => {
  const { app, sim } = await cacheStack(t, { env: { ADMIN_TOKEN, REDIS_URL: '' } })
  await app.inject('/profile/alice')
  const purge = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: authorized })
  t.same(purge.json(), { username: 'alice', stale: 1 })
  t.equal((await app.inject('/profile/alice')).headers['x-cache'], 'STALE')
  await eventually(async () => (await app.inject('/profile/alice')).headers['x-cache'] === 'HIT', 'revalidated')
  t.equal(sim.callsFor('profile', 'alice'), 2)
})

t.test('a purge of an invalid username is 400 INVALID_USERNAME', async (t) => {
  const { app } = await cacheStack(t, { env: { ADMIN_TOKEN } })
  const res = await app.inject({ method: 'POST', url: `/admin/purge/${'x'.repeat(129)}`, headers: authorized })
  t.equal(res.statusCode, 400)
  t.equal(res.json().code, 'INVALID_USERNAME')
})

t.test('wrong admin tokens are counted by the per-client rate limit: guessing it is slowed down like any request', async (t) => {
  const { app } = await cacheStack(t, { env: { ADMIN_TOKEN, RATE_LIMIT_PER_MINUTE: '2' } })
  const guess = async (): Promise<number> => (await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: { authorization: 'Bearer guess' } })).statusCode
  t.same([await guess(), await guess(), await guess()], [401, 401, 429])
  const right = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: authorized })
  t.equal(right.statusCode, 429, 'the right token waits for the window like the guesses')
  t.equal(right.json().code, 'RATE_LIMITED')
})
