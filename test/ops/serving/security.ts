import t from 'tap'
import { stack } from '../../helper.ts'

t.test('CORS_ORIGINS=* lets any origin read answers, errors included, and expose the caching headers', async (t) => {
  const { app } = await stack(t)
  for (const url of ['/profile/alice', '/profile/ghost-1', '/nowhere']) {
    const res = await app.inject({ url, headers: { origin: 'https://app.example' } })
    t.equal(res.headers['access-control-allow-origin'], '*', url)
  }
  const res = await app.inject({ url: '/profile/alice', headers: { origin: 'https://app.example' } })
  const exposed = String(res.headers['access-control-expose-headers']).split(/,\s*/)
  for (const header of ['x-cache', 'etag', 'age', 'retry-after', 'x-request-id']) t.ok(exposed.includes(header), header)
  t.equal(res.headers['access-control-allow-credentials'], undefined, 'no credentials: the service holds no session')
})

t.test('a preflight is answered for GET, without reaching the upstream', async (t) => {
  const { app, sim } = await stack(t)
  const res = await app.inject({
    method: 'OPTIONS',
    url: '/profile/alice',
    headers: { origin: 'https://app.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'if-none-match' }
  })
  t.equal(res.statusCode, 204)
  t.equal(res.headers['access-control-allow-origin'], '*')
  t.match(res.headers['access-control-allow-methods'], /\bGET\b/)
  t.match(res.headers['access-control-allow-headers'], /if-none-match/)
  t.equal(res.headers['access-control-max-age'], '600')
  t.equal(sim.stats.dataCalls, 0)
})

t.test('a list of origins allows exactly those origins', async (t) => {
  const { app } = await stack(t, { env: { CORS_ORIGINS: 'https://a.example, https://b.example' } })
  for (const origin of ['https://a.example', 'https://b.example']) {
    const res = await app.inject({ url: '/profile/alice', headers: { origin } })
    t.equal(res.headers['access-control-allow-origin'], origin, origin)
    t.match(res.headers.vary, /origin/i, 'caches keep answers for different origins apart')
  }
  for (const origin of ['https://c.example', 'https://a.example.evil', 'http://a.example']) {
    const res = await app.inject({ url: '/profile/alice', headers: { origin } })
    t.equal(res.statusCode, 200, 'the answer itself is not refused: the browser hides it')
    t.equal(res.headers['access-control-allow-origin'], undefined, origin)
  }
})

t.test('API answers carry security headers suited to JSON', async (t) => {
  const { app } = await stack(t)
  for (const url of ['/profile/alice', '/profile/ghost-1', '/readyz']) {
    const res = await app.inject(url)
    t.equal(res.headers['content-security-policy'], "default-src 'none';frame-ancestors 'none'", url)
    t.equal(res.headers['x-content-type-options'], 'nosniff', url)
    t.equal(res.headers['x-frame-options'], 'DENY', url)
    t.equal(res.headers['referrer-policy'], 'no-referrer', url)
    t.match(res.headers['strict-transport-security'], /max-age=\d+/, url)
    t.equal(res.headers['cross-origin-resource-policy'], 'cross-origin', 'other origins may read (CORS decides which)')
    t.equal(res.headers['x-powered-by'], undefined, url)
  }
})

t.test('the HTML pages of /docs get helmet\'s whole set; JSON answers only the headers that act on JSON', async (t) => {
  const { app } = await stack(t)
  const documentOnly = ['cross-origin-opener-policy', 'origin-agent-cluster', 'x-dns-prefetch-control', 'x-download-options', 'x-permitted-cross-domain-policies', 'x-xss-protection']
  const page = await app.inject('/docs')
  t.equal(page.headers['cross-origin-opener-policy'], 'same-origin')
  t.equal(page.headers['x-xss-protection'], '0', 'the old XSS filter switched off')
  for (const header of documentOnly) t.ok(page.headers[header], `/docs: ${header}`)
  for (const header of ['x-frame-options', 'x-content-type-options', 'strict-transport-security', 'referrer-policy']) t.ok(page.headers[header], `/docs: ${header}`)
  const res = await app.inject('/profile/alice')
  for (const header of documentOnly) t.equal(res.headers[header], undefined, `JSON: no ${header}`)
})

t.test('every answer carries a request id; a well-formed X-Request-Id from the caller is kept', async (t) => {
  const { app } = await stack(t)
  const own = await app.inject('/healthz')
  t.match(own.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  const other = await app.inject('/healthz')
  t.not(other.headers['x-request-id'], own.headers['x-request-id'])
  const kept = await app.inject({ url: '/healthz', headers: { 'x-request-id': 'lb-7f3a:42' } })
  t.equal(kept.headers['x-request-id'], 'lb-7f3a:42')
  for (const bad of ['x'.repeat(129), 'a b', '../etc', '"quoted"']) {
    const replaced = await app.inject({ url: '/healthz', headers: { 'x-request-id': bad } })
    t.match(replaced.headers['x-request-id'], /^[0-9a-f-]{36}$/, JSON.stringify(bad.slice(0, 10)))
  }
})

t.test('an OPTIONS request that is not a preflight is an unsupported method: 405 METHOD_NOT_ALLOWED as JSON', async (t) => {
  for (const CORS_ORIGINS of ['*', 'https://app.example']) {
    const { app } = await stack(t, { env: { CORS_ORIGINS } })
    for (const headers of [{}, { origin: 'https://app.example' }, { 'access-control-request-method': 'GET' }]) {
      const res = await app.inject({ method: 'OPTIONS', url: '/profile/alice', headers })
      t.equal(res.statusCode, 405, `${CORS_ORIGINS} ${JSON.stringify(headers)}`)
      t.equal(res.headers.allow, 'GET, HEAD')
      t.same(res.json(), {
        statusCode: 405, code: 'METHOD_NOT_ALLOWED', error: 'Method Not Allowed', message: 'Method OPTIONS is not allowed here; allowed: GET, HEAD'
      })
    }
  }
})
