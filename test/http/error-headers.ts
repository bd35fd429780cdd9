import t, { type Test } from 'tap'
import { stack } from '../helper.ts'

const ORIGIN = { origin: 'https://app.example' }

/** What every answer carries, errors included: CORS, the security headers, the request id. */
function assertAnswerHeaders (t: Test, headers: Record<string, unknown>, what: string): void {
  t.equal(headers['access-control-allow-origin'], '*', `${what}: CORS`)
  t.match(headers['access-control-expose-headers'], /x-request-id/, `${what}: exposed headers`)
  t.match(headers['x-request-id'], /\S/, `${what}: X-Request-Id`)
  t.equal(headers['content-security-policy'], "default-src 'none';frame-ancestors 'none'", `${what}: CSP`)
  t.equal(headers['x-content-type-options'], 'nosniff', `${what}: nosniff`)
  t.match(headers['content-type'], /^application\/json/, `${what}: JSON`)
}

t.test('a malformed URL, answered by Fastify before routing, carries CORS, security headers and the request id', async (t) => {
  const { app, sim } = await stack(t)
  for (const url of ['/profile/%ZZ', '/user/%E0%A4%A?query=name', '/nowhere/%']) {
    const res = await app.inject({ url, headers: { ...ORIGIN, 'x-request-id': 'trace-malformed-1' } })
    t.equal(res.statusCode, 400, url)
    t.equal(res.json().code, 'BAD_REQUEST', url)
    t.equal(res.json().error, 'Bad Request', url)
    t.equal(res.headers['x-request-id'], 'trace-malformed-1', 'the caller\'s own id is echoed')
    t.equal(res.headers['cache-control'], 'no-store')
    assertAnswerHeaders(t, res.headers, url)
  }
  t.equal(sim.stats.dataCalls, 0)
})

t.test('with a list of origins, an allowed origin is named on a framework error; another gets no CORS header', async (t) => {
  const { app } = await stack(t, { env: { CORS_ORIGINS: 'https://a.example' } })
  const allowed = await app.inject({ url: '/profile/%ZZ', headers: { origin: 'https://a.example' } })
  t.equal(allowed.headers['access-control-allow-origin'], 'https://a.example')
  t.match(allowed.headers.vary, /origin/i)
  const other = await app.inject({ url: '/profile/%ZZ', headers: { origin: 'https://b.example' } })
  t.equal(other.statusCode, 400)
  t.equal(other.headers['access-control-allow-origin'], undefined)
})

t.test('a body too large carries the same headers', async (t) => {
  const { app } = await stack(t, { env: { ADMIN_TOKEN: 'admin-token' } })
  const res = await app.inject({
    method: 'POST',
    url: '/admin/purge/alice',
    headers: { ...ORIGIN, authorization: 'Bearer admin-token', 'content-type': 'application/json' },
    payload: JSON.stringify({ padding: 'x'.repeat(2 * 1024 * 1024) })
  })
  t.equal(res.statusCode, 413)
  t.same(res.json(), { statusCode: 413, code: 'PAYLOAD_TOO_LARGE', error: 'Payload Too Large', message: 'Request body is too large' })
  assertAnswerHeaders(t, res.headers, '413')
})

t.test('the purge refuses a body of any type but JSON with the same 415, text/plain included', async (t) => {
  const { app } = await stack(t, { env: { ADMIN_TOKEN: 'admin-token' } })
  for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'text/plain; charset=utf-8', 'application/xml']) {
    const res = await app.inject({
      method: 'POST', url: '/admin/purge/alice', headers: { ...ORIGIN, authorization: 'Bearer admin-token', 'content-type': type }, payload: 'hello'
    })
    t.equal(res.statusCode, 415, type)
    t.same(res.json(), { statusCode: 415, code: 'UNSUPPORTED_MEDIA_TYPE', error: 'Unsupported Media Type', message: 'Unsupported Media Type' }, type)
    t.equal(res.headers['cache-control'], 'no-store', type)
    assertAnswerHeaders(t, res.headers, type)
  }
})

t.test('a known route asked with another method answers 405 METHOD_NOT_ALLOWED with Allow', async (t) => {
  const { app, sim } = await stack(t)
  for (const [method, url] of [['POST', '/profile/alice'], ['DELETE', '/profile/alice/timeline'], ['PUT', '/user/alice?query=name'],
    ['PATCH', '/profiles?username=alice'], ['OPTIONS', '/profile/alice']] as const) {
    const res = await app.inject({ method, url, headers: ORIGIN })
    t.equal(res.statusCode, 405, `${method} ${url}`)
    t.equal(res.headers.allow, 'GET, HEAD')
    t.same(res.json(), {
      statusCode: 405, code: 'METHOD_NOT_ALLOWED', error: 'Method Not Allowed', message: `Method ${method} is not allowed here; allowed: GET, HEAD`
    })
    t.equal(res.headers['cache-control'], 'no-store')
    assertAnswerHeaders(t, res.headers, `${method} ${url}`)
  }
  const unknown = await app.inject({ method: 'POST', url: '/nowhere', headers: ORIGIN })
  t.equal(unknown.statusCode, 404, 'an unknown path stays 404, whatever the method')
  t.equal(unknown.json().code, 'NOT_FOUND')
  assertAnswerHeaders(t, unknown.headers, 'unknown path')
  t.equal(sim.stats.dataCalls, 0)
})

t.test('a body that cannot be parsed does not hide that no route takes the request; one too large is still 413', async (t) => {
  const { app } = await stack(t)
  const json = { ...ORIGIN, 'content-type': 'application/json' }
  for (const [what, method, url, payload, status, code] of [
    ['no such path', 'POST', '/nowhere', '{', 404, 'NOT_FOUND'],
    ['no such path, an empty body', 'POST', '/nowhere', '', 404, 'NOT_FOUND'],
    ['a path of another method', 'DELETE', '/profile/alice', '{', 405, 'METHOD_NOT_ALLOWED'],
    ['the purge without ADMIN_TOKEN', 'POST', '/admin/purge/alice', '{', 404, 'NOT_FOUND']
  ] as const) {
    const res = await app.inject({ method, url, headers: json, payload })
    t.equal(res.statusCode, status, what)
    t.match(res.json(), { statusCode: status, code }, what)
    t.equal(res.headers.allow, status === 405 ? 'GET, HEAD' : undefined, `${what}: Allow`)
    assertAnswerHeaders(t, res.headers, what)
  }
  const large = await app.inject({ method: 'POST', url: '/nowhere', headers: json, payload: `"${'x'.repeat(2 * 1024 * 1024)}"` })
  t.equal(large.statusCode, 413)
  t.equal(large.json().code, 'PAYLOAD_TOO_LARGE')
})

t.test('an error message repeats at most a short prefix of what the caller sent', async (t) => {
  const { app } = await stack(t)
  const long = 'ghost-' + 'x'.repeat(120)
  const notFound = await app.inject(`/profile/${long}`)
  t.equal(notFound.json().code, 'PROFILE_NOT_FOUND')
  t.equal(notFound.json().message, `No profile for username ${long.slice(0, 40)}…`)
  const route = await app.inject(`/nowhere/${'y'.repeat(1000)}`)
  t.equal(route.json().message, `Route GET /nowhere/${'y'.repeat(31)}… not found`)
  const malformed = await app.inject(`/profile/%ZZ${'z'.repeat(1000)}`)
  t.ok(malformed.json().message.length <= 81, 'a Fastify message is cut too')
  const batch = await app.inject(`/profiles?username=${long}`)
  t.equal(batch.json().errors[long].message, `No profile for username ${long.slice(0, 40)}…`)
})

t.test('a missing file of the docs\' UI answers 404 NOT_FOUND, not a 405 naming the method asked as allowed', async (t) => {
  const { app } = await stack(t)
  for (const method of ['GET', 'HEAD'] as const) {
    const res = await app.inject({ method, url: '/docs/static/nope.js', headers: ORIGIN })
    t.equal(res.statusCode, 404, method)
    t.equal(res.headers.allow, undefined, `${method}: no Allow`)
    if (method === 'GET') t.same(res.json(), { statusCode: 404, code: 'NOT_FOUND', error: 'Not Found', message: 'Route GET /docs/static/nope.js not found' })
  }
  const post = await app.inject({ method: 'POST', url: '/docs/static/nope.js', headers: ORIGIN })
  t.equal(post.statusCode, 405, 'another method is still refused as such')
  t.equal(post.headers.allow, 'GET, HEAD')
})
