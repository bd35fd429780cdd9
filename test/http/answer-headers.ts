import Fastify from 'fastify'
import t from 'tap'
import answerHeaders from '../../src/plugins/answer-headers.ts'
import { stack } from '../helper.ts'

t.test('the answer headers take contributions while the app registers, and none once it is ready', async (t) => {
  const app = Fastify({ genReqId: () => 'req-1' })
  t.teardown(() => app.close())
  await app.register(answerHeaders)
  app.answerHeaders.add({ 'x-constant': 'a' })
  app.answerHeaders.add((headers): Record<string, string> => headers.origin === 'https://a.example' ? { 'x-chosen': 'a' } : {})
  app.get('/', async () => 'ok')
  await app.ready()
  t.throws(() => { app.answerHeaders.add({ 'x-late': 'b' }) }, /while the app registers/)
  const chosen = await app.inject({ url: '/', headers: { origin: 'https://a.example' } })
  t.match(chosen.headers, { 'x-constant': 'a', 'x-chosen': 'a', 'x-request-id': 'req-1' })
  const other = await app.inject('/')
  t.equal(other.headers['x-chosen'], undefined)
  t.equal(other.headers['x-late'], undefined)
  t.same(app.answerHeaders.of({ origin: 'https://a.example' }, 'req-2'), { 'x-constant': 'a', 'x-chosen': 'a', 'x-request-id': 'req-2' },
    'the same headers for an answer written past the hooks')
})

t.test('a 404 may be cached: NOT_FOUND_TTL_SECONDS for an unknown route; any other error never', async (t) => {
  const { app } = await stack(t, { env: { NOT_FOUND_TTL_SECONDS: '17' } })
  const unknown = await app.inject('/nowhere')
  t.equal(unknown.statusCode, 404)
  t.equal(unknown.headers['cache-control'], 'public, max-age=17')
  for (const [method, url] of [['GET', '/user/alice?query=nothing'], ['POST', '/profile/alice']] as const) {
    const res = await app.inject({ method, url })
    t.ok(res.statusCode >= 400, `${method} ${url}: ${res.statusCode}`)
    t.equal(res.headers['cache-control'], 'no-store', `${method} ${url}`)
  }
})

t.test('every answer carries Cache-Control: no-store on liveness and on a preflight, whose own caching stays Access-Control-Max-Age', async (t) => {
  const { app } = await stack(t)
  for (const method of ['GET', 'HEAD'] as const) {
    const res = await app.inject({ method, url: '/healthz' })
    t.equal(res.statusCode, 200, method)
    t.equal(res.headers['cache-control'], 'no-store', `${method} /healthz`)
  }
  const preflight = await app.inject({
    method: 'OPTIONS', url: '/profile/alice', headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' }
  })
  t.equal(preflight.statusCode, 204)
  t.equal(preflight.headers['cache-control'], 'no-store')
  t.equal(preflight.headers['access-control-max-age'], '600')
  for (const url of ['/readyz', '/metrics', '/docs/json', '/docs/static/swagger-ui.css', '/profile/alice']) {
    t.match((await app.inject(url)).headers['cache-control'], /\S/, url)
  }
})
