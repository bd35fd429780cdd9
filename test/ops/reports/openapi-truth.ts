import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import type { Simulator } from '../../../dev/simulator.ts'
import { buildApp, type AppOptions } from '../../../src/app.ts'
import { eventually, simulator, testConfig } from '../../helper.ts'
import { DocumentCheck, type Exchange } from '../openapi-check.ts'
import { exchange } from '../raw-http.ts'

const ADMIN_TOKEN = 'corpus-admin-token'
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }

/** One request of the corpus: `invalid` when the document should refuse it too (the service answers 400). */
interface Call {
  method?: 'GET' | 'HEAD' | 'POST' | 'DELETE'
  url: string
  headers?: Record<string, string>
  payload?: string
  invalid?: boolean
  /** An answer to a request no operation matches (404, 405): checked against the document's components. */
  component?: boolean
}

interface Recorded extends Exchange { call: Call }

interface Service { app: FastifyInstance, sim: Simulator, port: number }

type Document = Record<string, unknown> & { paths: Record<string, Record<string, { operationId: string, responses: object }>> }

/** An app with ADMIN_TOKEN set, listening (raw requests need a port), in front of a simulator of its own. */
async function service (t: Test, env: Record<string, string> = {}, options: Partial<AppOptions> = {}): Promise<Service> {
  const sim = await simulator(t)
  const app = await buildApp({ config: testConfig(t, sim, { ADMIN_TOKEN, ...env }), loadShedding: { maxEventLoopDelay: 0 }, ...options })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, sim, port: (app.server.address() as { port: number }).port }
}

/** The body as a client reads it, decoded when it came compressed. */
function decoded (raw: Buffer, encoding: unknown): string {
  if (encoding === 'br') return brotliDecompressSync(raw).toString()
  if (encoding === 'gzip') return gunzipSync(raw).toString()
  return raw.toString()
}

async function injected (app: FastifyInstance, call: Call): Promise<Recorded> {
  const { method = 'GET', url, headers = {}, payload } = call
  const res = await app.inject({ method, url, headers, ...(payload !== undefined && { payload }) })
  return { call, method, url, headers, status: res.statusCode, responseHeaders: res.headers, body: decoded(res.rawPayload, res.headers['content-encoding']) }
}

/** Sent as bytes on a socket of its own, for what only Node's HTTP parser sees. */
async function raw (port: number, call: Call, request: string): Promise<Recorded> {
  const { method = 'GET', url } = call
  const answer = await exchange(port, request)
  return { call, method, url, status: answer.status, responseHeaders: answer.headers, body: answer.body }
}

/** Requests a client of each operation may send that the service refuses before its route runs: the framing's errors. */
function framingErrors (port: number, method: string, url: string): Array<Promise<Recorded>> {
  // Connection: close, so that each exchange ends when its answer does.
  const line = `${method} ${url} HTTP/1.1\r\nHost: bff.test\r\nConnection: close\r\n`
  const call = { method: method as Call['method'], url }
  const long = `${url}${url.includes('?') ? '&' : '?'}pad=${'p'.repeat(8_100)}`
  return [
    raw(port, call, `${line}X-Note: a\u0001b\r\n\r\n`), // 400 MALFORMED_REQUEST
    raw(port, call, `${method} ${url} HTTP/1.1\r\nConnection: close\r\n\r\n`), // 400 MALFORMED_REQUEST (no Host)
    raw(port, call, `${method} ${url} HTTP/1.1\r\nHost: bff.test\r\n`), // 408 REQUEST_TIMEOUT: the headers never end
    raw(port, { ...call, url: long, invalid: true }, `${method} ${long} HTTP/1.1\r\nHost: bff.test\r\nConnection: close\r\n\r\n`), // 414
    raw(port, call, `${line}Expect: a-miracle\r\n\r\n`), // 417
    raw(port, call, `${line}X-Big: ${'b'.repeat(20_000)}\r\n\r\n`) // 431
  ]
}

const OPERATIONS: Array<[string, string]> = [
  ['GET', '/profile/alice'], ['GET', '/profile/alice/timeline'], ['GET', '/user/alice?query=name'], ['GET', '/profiles?username=alice'],
  ['GET', '/healthz'], ['GET', '/readyz'], ['GET', '/metrics'], ['POST', '/admin/purge/alice']
]

/** Every operation, every status each can answer here: from a healthy service, a rate-limited one, a shedding one. */
async function corpus (t: Test): Promise<{ recorded: Recorded[], document: Document }> {
  const slowClients = { headersMs: 300, requestMs: 400, checkIntervalMs: 100 }
  // A list of origins here (answers then vary by Origin), `*` on the others. A timeout a loaded machine's own calls
  // stay well inside: at 150 ms, ordinary calls timing out opened the breaker before the faults (502s for 504s).
  const main = await service(t, { UPSTREAM_TIMEOUT_MS: '500', CORS_ORIGINS: 'https://app.example' }, { slowClients })
  const limited = await service(t, { RATE_LIMIT_PER_MINUTE: '1' })
  const shedding = await service(t, {}, { loadShedding: { maxHeapUsedBytes: 1, sampleInterval: 10 } })
  const { app, sim } = main
  const all: Recorded[] = []
  const send = async (target: FastifyInstance, ...calls: Call[]) => { for (const call of calls) all.push(await injected(target, call)) }
  const tagOf = async (url: string) => String((await app.inject(url)).headers.etag)

  await send(app,
    { url: '/profile/alice' }, { url: '/profile/alice' }, { method: 'HEAD', url: '/profile/alice' },
    { url: '/profile/alice', headers: { 'if-none-match': await tagOf('/profile/alice') } },
    { url: '/profile/alice', headers: { 'accept-encoding': 'br', origin: 'https://app.example' } },
    { url: '/profile/ghost-1' }, { url: '/profile/a%01b', invalid: true }, { url: '/profile/%ZZ', invalid: true },
    { url: '/profile/alice/timeline' }, { url: '/profile/alice/timeline', headers: { 'if-none-match': await tagOf('/profile/alice/timeline') } },
    { url: '/profile/ghost-2/timeline' }, { url: `/profile/${'n'.repeat(129)}/timeline`, invalid: true },
    { url: '/user/alice?query=Credits' }, { url: '/user/alice?query=NAME' }, { url: '/user/bob?query=aBoUt' },
    { url: '/user/alice?query=credits', headers: { 'if-none-match': await tagOf('/user/alice?query=credits') } },
    { url: '/user/alice?query=nope', invalid: true }, { url: '/user/alice', invalid: true }, { url: '/user/ghost-3?query=name' },
    { url: '/profiles?username=alice&username=ghost-4&username=a%01b&fields=name&fields=Credits' },
    { url: '/profiles?username=alice&username=bob&fields=NAME,age' },
    { url: `/profiles?${Array.from({ length: 12 }, (_, i) => `username=user-${i}`).join('&')}`, headers: { 'accept-encoding': 'gzip' } },
    { url: '/profiles?username=alice', headers: { 'if-none-match': await tagOf('/profiles?username=alice') } },
    { url: '/profiles' }, { url: '/profiles?username=alice&fields=nope', invalid: true }, { url: '/profiles?username=%ZZ' },
    { url: '/healthz' }, { url: '/readyz' }, { url: '/metrics' },
    { method: 'POST', url: '/admin/purge/alice', headers: admin }, { method: 'POST', url: '/admin/purge/alice' },
    { method: 'POST', url: '/admin/purge/a%01b', headers: admin, invalid: true },
    { method: 'POST', url: '/admin/purge/alice', headers: { ...admin, 'content-type': 'application/json' }, payload: `"${'x'.repeat(1_100_000)}"` },
    { method: 'POST', url: '/admin/purge/alice', headers: { ...admin, 'content-type': 'text/plain' }, payload: 'hello' },
    { method: 'DELETE', url: '/profile/alice', component: true }, { url: '/nowhere', component: true })

  // HEAD, which the document says every GET shares (status and headers, no body).
  await send(app, ...OPERATIONS.filter(([method]) => method === 'GET').map(([, url]): Call => ({ method: 'HEAD', url })))
  all.push(...await Promise.all(OPERATIONS.flatMap(([method, url]) => framingErrors(main.port, method, url))))

  // The upstream failing, one way after another (a success between, so that the circuit breaker stays closed):
  // a 504, 502s, then a 429 that leaves it in back-off (503).
  for (const [fault, username] of [[{ kind: 'hang' }, 'f-1'], [{ kind: 'status', status: 500 }, 'f-2'], [{ kind: 'invalid-json' }, 'f-3'],
    [{ kind: 'status', status: 429, retryAfter: '30' }, 'f-4']] as const) {
    sim.failAlways(fault)
    await send(app, { url: `/profile/${username}` }, { url: `/profile/${username}/timeline` }, { url: `/user/${username}?query=age` })
    sim.failAlways(undefined)
    await send(app, { url: `/profile/ok-${username}` })
  }

  for (const url of ['/profile/alice', '/profile/alice/timeline', '/user/alice?query=age', '/profiles?username=alice']) {
    await send(limited.app, { url }, { url })
  }
  await send(limited.app, { method: 'POST', url: '/admin/purge/alice', headers: admin })

  await eventually(() => shedding.app.isUnderPressure(), 'under pressure')
  await send(shedding.app, ...OPERATIONS.map(([method, url]): Call => ({ method: method as Call['method'], url, headers: admin })))

  const document = (await app.inject('/docs/json')).json() as Document
  app.beginClosing()
  await send(app, { url: '/readyz' })
  return { recorded: all, document }
}

t.test('every answer of every operation is what /docs/json says of it, checked by an independent validator', async (t) => {
  const { recorded, document } = await corpus(t)
  const check = new DocumentCheck(document, { 404: 'NotFound', 405: 'MethodNotAllowed' })
  const seen = new Map<string, Set<string>>()
  for (const one of recorded) {
    const label = `${one.method} ${one.url.slice(0, 60)} -> ${one.status}`
    if (one.call.component !== true) {
      const request = check.requestFindings(one)
      if (one.call.invalid === true) t.not(request.length, 0, `${label}: the document refuses this request too`)
      else t.same(request, [], `${label}: a request the document takes`)
      const id = check.operation(one.method, one.url)?.operationId ?? '?'
      seen.set(id, (seen.get(id) ?? new Set()).add(String(one.status)))
    }
    t.same(check.responseFindings(one, one.call.component === true), [], label)
  }
  // 500 INTERNAL_ERROR is for what nothing here can cause. A GET's 413 (chunk extensions over 16 KiB) races its answer.
  for (const operations of Object.values(document.paths)) {
    for (const [method, { operationId, responses }] of Object.entries(operations)) {
      const unreached = method === 'get' ? ['500', '413'] : ['500']
      const documented = Object.keys(responses).filter((status) => !unreached.includes(status))
      t.same([...seen.get(operationId) ?? []].sort(), documented.sort(), `${operationId}: every documented status answered, no other`)
    }
  }
  t.ok(recorded.length > 100, `${recorded.length} exchanges`)
})
