import { STATUS_CODES } from 'node:http'
import t, { type Test } from 'tap'
import { eventually } from '../../helper.ts'
import { resolveResponses } from '../openapi-check.ts'
import { sharedApp } from './app.ts'

interface Example { value: { statusCode: number, code: string, error: string, message: string } }
interface MediaType { schema: Record<string, unknown>, example?: Example['value'], examples?: Record<string, Example> }
interface Operation {
  operationId?: string
  summary?: string
  description?: string
  tags?: string[]
  parameters?: Array<{ name: string, in: string, example?: unknown }>
  responses: Record<string, { description: string, headers?: object, content?: Record<string, MediaType> }>
}

/** What each data route can answer besides 200 and 304, by status: the contract's codes. */
const lookupErrors: Record<string, string[]> = {
  404: ['PROFILE_NOT_FOUND'],
  408: ['REQUEST_TIMEOUT'],
  413: ['PAYLOAD_TOO_LARGE'],
  414: ['URI_TOO_LONG'],
  417: ['EXPECTATION_FAILED'],
  429: ['RATE_LIMITED'],
  431: ['HEADERS_TOO_LARGE'],
  500: ['INTERNAL_ERROR'],
  502: ['UPSTREAM_ERROR', 'UPSTREAM_INVALID_RESPONSE', 'UPSTREAM_AUTH_FAILED'],
  503: ['UPSTREAM_RATE_LIMITED', 'UPSTREAM_OVERLOADED', 'UPSTREAM_BUDGET_EXHAUSTED', 'SERVICE_OVERLOADED'],
  504: ['UPSTREAM_TIMEOUT']
}
const routes: Record<string, Record<string, string[]>> = {
  '/profile/{username}': { 400: ['INVALID_USERNAME', 'BAD_REQUEST', 'MALFORMED_REQUEST'], ...lookupErrors },
  '/profile/{username}/timeline': { 400: ['INVALID_USERNAME', 'BAD_REQUEST', 'MALFORMED_REQUEST'], ...lookupErrors },
  '/user/{username}': { 400: ['INVALID_USERNAME', 'INVALID_FIELD', 'BAD_REQUEST', 'MALFORMED_REQUEST'], ...lookupErrors }
}

/** OpenAPI writes one example as `example`, several as named `examples`. */
function errorExamples (media: MediaType | undefined): Array<Example['value']> {
  if (media?.examples !== undefined) return Object.values(media.examples).map((example) => example.value)
  return media?.example === undefined ? [] : [media.example]
}

interface Document {
  openapi: string
  servers?: Array<{ url: string }>
  tags: Array<{ name: string, description: string }>
  paths: Record<string, Record<string, Operation>>
}

async function openapi (t: Test, env: Record<string, string> = {}) {
  const app = await sharedApp(env)
  const res = await app.inject('/docs/json')
  t.equal(res.statusCode, 200)
  // The answers shared by every operation are components it refers to: read in place, as a client generator does.
  return { app, document: resolveResponses(res.json() as Record<string, unknown>) as unknown as Document & { paths: Record<string, { get: Operation }> } }
}

t.test('/docs/json is an OpenAPI document of the three routes and the operational ones', async (t) => {
  const { document } = await openapi(t)
  t.match(document.openapi, /^3\.1\./)
  t.same(Object.keys(document.paths).sort(),
    ['/healthz', '/metrics', '/profile/{username}', '/profile/{username}/timeline', '/profiles', '/readyz', '/user/{username}'])
})

t.test('every operation has an operationId, a summary and a description; the document names its server and its tags', async (t) => {
  const { document } = await openapi(t, { ADMIN_TOKEN: 'a-token' })
  const operations = Object.values(document.paths).flatMap((methods) => Object.values(methods))
  t.equal(operations.length, 8)
  for (const { operationId, summary, description } of operations) {
    t.match(operationId, /^[a-z]\w+$/)
    t.match(summary, /\w/, `${operationId}: summary`)
    t.match(description, /\w/, `${operationId}: description`)
  }
  t.equal(new Set(operations.map(({ operationId }) => operationId)).size, operations.length, 'operationIds are unique')
  t.same(document.servers, [{ url: '/', description: 'this service, at the origin that serves this document' }])
  const admin = document.paths['/admin/purge/{username}']?.post
  t.same(admin?.tags, ['admin'])
  t.ok(admin?.responses['429'], 'the purge is rate limited, and says so')
  t.match(JSON.stringify(admin?.responses['401']), /www-authenticate/)
  t.notMatch(JSON.stringify(document.tags), /never rate limited\W[^/]*admin/i)
})

t.test('a client can be generated from it: operationIds, case-insensitive fields, every header documented', async (t) => {
  const { document } = await openapi(t)
  const operations = ['/profile/{username}', '/profile/{username}/timeline', '/user/{username}', '/profiles']
    .map((path) => [path, document.paths[path]?.get] as const)
  t.same(operations.map(([, operation]) => operation?.operationId), ['getProfile', 'getTimeline', 'getField', 'getProfiles'])
  const parameter = (path: string, name: string) => (document.paths[path]?.get.parameters ?? [])
    .find((one) => one.name === name) as { in: string, description?: string, schema: Record<string, unknown> } | undefined
  // Enums of the ten lower-case values (a generated client gets their union); any case is accepted, and said so.
  const values = ['name', 'age', 'gender', 'location', 'credits', 'rank', 'videos', 'photos', 'joined', 'about']
  const query = parameter('/user/{username}', 'query')
  const fields = parameter('/profiles', 'fields')
  t.same(query?.schema.enum, values)
  t.same((fields?.schema.items as { enum?: string[] } | undefined)?.enum, values)
  t.match(fields, { style: 'form', explode: false }, '`fields` is comma-separated')
  for (const one of [query, fields]) t.match(one?.description, /case-insensitively/)
  t.equal(parameter('/profiles', 'username')?.schema.type, 'array')
  for (const [path, operation] of operations) {
    t.equal(parameter(path, 'if-none-match')?.in, 'header', `${path}: If-None-Match`)
    for (const [status, response] of Object.entries(operation?.responses ?? {})) {
      const headers = Object.keys((response as { headers?: object }).headers ?? {})
      t.ok(headers.includes('x-request-id'), `${path} ${status}: X-Request-Id`)
      if (status === '200' || status === '304') {
        for (const header of ['x-cache', 'cache-control', 'etag', 'age', 'server-timing', 'vary', 'content-encoding']) {
          t.ok(headers.includes(header), `${path} ${status}: ${header}`)
        }
      } else {
        const code = (response.content?.['application/json']?.schema as { properties: { code: { enum?: string[] } } }).properties.code
        t.ok(Array.isArray(code.enum) && code.enum.length > 0, `${path} ${status}: code is an enum`)
      }
    }
  }
})

t.test('each data route documents its parameters and its 200 body, with examples', async (t) => {
  const { document } = await openapi(t)
  for (const path of Object.keys(routes)) {
    const operation = document.paths[path]?.get
    if (operation === undefined) throw new Error(`${path} is not documented`)
    const username = operation.parameters?.find((parameter) => parameter.name === 'username')
    t.equal(username?.in, 'path', path)
    t.equal(username?.example, 'alice', path)
    const ok = JSON.stringify(operation.responses['200'])
    t.match(ok, /"examples?":/, `${path}: the 200 body has an example`)
    t.ok(operation.responses['304'], `${path}: 304 on a current If-None-Match`)
  }
  const query = document.paths['/user/{username}']?.get.parameters?.find((parameter) => parameter.name === 'query')
  t.equal(query?.in, 'query')
  t.match(JSON.stringify(document.paths['/user/{username}']?.get.responses['200']), /"Credits":"1\.234\.567"/)
})

t.test('every error response of every data route names each code it can carry, with its body as an example', async (t) => {
  const { document } = await openapi(t)
  for (const [path, statuses] of Object.entries(routes)) {
    const responses = document.paths[path]?.get.responses ?? {}
    t.same(Object.keys(responses).filter((status) => Number(status) >= 400).sort(), Object.keys(statuses).sort(), path)
    for (const [status, codes] of Object.entries(statuses)) {
      const response = responses[status]
      const examples = errorExamples(response?.content?.['application/json'])
      t.same(examples.map((body) => body.code), codes, `${path} ${status}`)
      for (const body of examples) {
        t.equal(body.statusCode, Number(status), `${path} ${status} ${body.code}`)
        t.equal(body.error, STATUS_CODES[Number(status)], `${path} ${status} ${body.code}`)
      }
      for (const code of codes) t.match(response?.description, code, `${path} ${status}: the description names ${code}`)
    }
  }
})

t.test('documented error bodies are the ones the service sends', async (t) => {
  const { app, document } = await openapi(t)
  const examples = (path: string, status: string) =>
    errorExamples(document.paths[path]?.get.responses[status]?.content?.['application/json'])
  const badField = await app.inject('/user/alice?query=nope')
  t.same(examples('/user/{username}', '400').find((body) => body.code === 'INVALID_FIELD'), badField.json())
  const badName = await app.inject('/profile/a%01b')
  t.same(examples('/profile/{username}', '400')[0], badName.json())
  const badUrl = await app.inject('/profile/%ZZ')
  t.same(examples('/profile/{username}', '400').find((body) => body.code === 'BAD_REQUEST'), badUrl.json())
})

t.test('what spectral:oas warns of: info names a contact, and every reusable component is referred to', async (t) => {
  const app = await sharedApp()
  const document = (await app.inject('/docs/json')).json() as { info: { contact?: object }, components: Record<string, object> }
  t.ok(document.info.contact, 'info.contact')
  const text = JSON.stringify(document)
  // Security schemes are named by `security`, not referred to by $ref.
  const { securitySchemes, ...reusable } = document.components
  t.ok(securitySchemes)
  for (const [kind, components] of Object.entries(reusable)) {
    for (const name of Object.keys(components)) t.ok(text.includes(`"$ref":"#/components/${kind}/${name}"`), `${kind}/${name} is referred to`)
  }
})

t.test('/docs serves Swagger UI, with a content security policy that lets it run', async (t) => {
  const app = await sharedApp()
  const page = await app.inject('/docs')
  t.equal(page.statusCode, 200)
  t.match(page.headers['content-type'], /^text\/html/)
  const csp = String(page.headers['content-security-policy'])
  t.match(csp, /script-src 'self'/, 'its scripts may load')
  t.match(csp, /style-src 'self'/, 'its styles may load')
  t.notMatch(csp, /default-src 'none'/, 'not the API\'s policy, which would leave the page blank')
  t.notMatch(csp, /upgrade-insecure-requests/, 'over plain HTTP on any address, its scripts load over HTTP')
  const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1] ?? '')
  t.ok(assets.includes('/docs/static/swagger-ui-bundle.js'))
  for (const asset of assets.filter((url) => !url.includes('favicon'))) {
    t.equal((await app.inject(asset)).statusCode, 200, asset)
  }
  const initializer = await app.inject('/docs/static/swagger-initializer.js')
  t.match(initializer.body, /resolveUrl\('\.\/json'\)/, 'the UI reads /docs/json')
})

t.test('the docs are cacheable: each document has its tag, and a 304 for it keeps the 200\'s ETag and Cache-Control; the data routes carry none of their headers', async (t) => {
  const app = await sharedApp()
  const first = await app.inject('/docs/json')
  t.equal(first.statusCode, 200)
  const tag = String(first.headers.etag)
  t.match(tag, /^"[\w-]+"$/)
  t.equal(first.headers['cache-control'], 'public, max-age=3600')
  for (const condition of [tag, `W/${tag}`, `"another", ${tag}`, '*']) {
    const again = await app.inject({ url: '/docs/json', headers: { 'if-none-match': condition } })
    t.equal(again.statusCode, 304, condition)
    t.equal(again.body, '', condition)
    t.equal(again.headers.etag, tag, `${condition}: the 200's ETag`)
    t.equal(again.headers['cache-control'], 'public, max-age=3600', `${condition}: the 200's Cache-Control`)
  }
  const head = await app.inject({ method: 'HEAD', url: '/docs/json', headers: { 'if-none-match': tag } })
  t.equal(head.statusCode, 304, 'HEAD')
  t.equal(head.headers.etag, tag, 'HEAD: the 200\'s ETag')
  const other = await app.inject({ url: '/docs/json', headers: { 'if-none-match': '"another"' } })
  t.equal(other.statusCode, 200, 'a tag it never gave is not confirmed')
  const yaml = await app.inject('/docs/yaml')
  t.not(yaml.headers.etag, tag)
  const crossed = await app.inject({ url: '/docs/json', headers: { 'if-none-match': String(yaml.headers.etag) } })
  t.equal(crossed.statusCode, 200, 'another document\'s tag is not this one\'s')
  // The shared app's first token exchange may miss its 1 s deadline on a loaded machine (callers are then refused for
  // the back-off): what this checks is a profile's own headers, once it has one.
  let profile = await app.inject('/profile/alice')
  await eventually(async () => (profile = await app.inject('/profile/alice')).statusCode === 200, 'the shared app serves a profile')
  t.match(profile.headers['cache-control'], /^public, max-age=\d+, stale-while-revalidate=\d+, stale-if-error=\d+$/)
})
