import t from 'tap'
import * as errors from '../../../src/errors.ts'
import { stack } from '../../helper.ts'

type Documented = Record<string, Record<string, { responses: Record<string, { headers?: Record<string, { required?: boolean }> }> }>>

t.test('every 503 in the error table tells the caller when to come back', async (t) => {
  const table = Object.entries(errors).filter(([, value]) => typeof value === 'function' && (value.prototype as unknown) instanceof Error)
  const unavailable = table.flatMap(([name, make]) => {
    const error = new (make as new () => Error & { statusCode?: number })()
    return error.statusCode === 503 ? [[name, error] as const] : []
  })
  t.ok(unavailable.length >= 6, `${unavailable.map(([name]) => name).join(', ')}`)
  for (const [name, error] of unavailable) t.ok((errors.retryAfterOf(error) ?? 0) >= 1, `${name} carries Retry-After`)
  t.equal(errors.retryAfterOf(new errors.UPSTREAM_AUTH_FAILED('x')), undefined, 'a 502 does not')
})

t.test('a purge while Redis is unreachable answers 503 CACHE_UNAVAILABLE with Retry-After', async (t) => {
  const { app } = await stack(t, { env: { REDIS_URL: 'redis://127.0.0.1:1', ADMIN_TOKEN: 'admin-secret' } })
  const answer = await app.inject({ method: 'POST', url: '/admin/purge/alice', headers: { authorization: 'Bearer admin-secret' } })
  t.equal(answer.statusCode, 503)
  t.equal(answer.json().code, 'CACHE_UNAVAILABLE')
  t.match(answer.headers['retry-after'], /^[1-9]\d*$/)
})

t.test('the OpenAPI document marks Retry-After required on every 503', async (t) => {
  const { app } = await stack(t, { env: { ADMIN_TOKEN: 'admin-secret' } })
  const { paths } = (await app.inject('/docs/json')).json<{ paths: Documented }>()
  const unavailable = Object.entries(paths).flatMap(([path, operations]) => Object.entries(operations)
    .flatMap(([method, { responses }]) => responses['503'] === undefined ? [] : [[`${method} ${path}`, responses['503']] as const]))
  t.ok(unavailable.length >= 5, `${unavailable.length} operations answer 503`)
  for (const [operation, response] of unavailable) t.equal(response.headers?.['retry-after']?.required, true, operation)
})
