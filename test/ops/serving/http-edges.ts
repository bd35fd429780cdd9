import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { errorResponse } from '../../../src/http/error-response.ts'
import { capturedLogger, eventually, stack } from '../../helper.ts'
import { exchange, listening, listeningApp, type RawExchange } from '../raw-http.ts'

// Requests Node's HTTP parser refuses, and those it leaves to the server, on a real listening server.

const HOST = 'Host: 127.0.0.1\r\nOrigin: https://app.example\r\n'
const port = await listeningApp(t, { ADMIN_TOKEN: 'edge-admin-token' })

/** The contract's error answer: its status and code, the JSON body, and every answer's headers. */
function onContract (t: Test, answer: RawExchange, status: number, code: string, closes = true): void {
  t.equal(answer.status, status, 'status line')
  const body = JSON.parse(answer.body) as Record<string, unknown>
  t.match(body, { statusCode: status, code, error: String, message: String }, 'the contract\'s body')
  t.same(Object.keys(body), ['statusCode', 'code', 'error', 'message'])
  t.match(answer.headers['content-type'], /^application\/json/)
  t.match(answer.headers['x-request-id'], /\S/, 'X-Request-Id')
  t.equal(answer.headers['access-control-allow-origin'], '*', 'CORS')
  t.equal(answer.headers['x-content-type-options'], 'nosniff', 'a security header')
  t.equal(answer.headers['content-security-policy'], "default-src 'none';frame-ancestors 'none'", 'the API\'s CSP')
  t.equal(answer.headers['cache-control'], 'no-store')
  if (closes) t.equal(answer.headers.connection?.toLowerCase(), 'close', 'Connection: close')
  t.equal(answer.error, undefined, 'no reset: the whole answer arrived')
}

const refused: Array<[string, string, number, string]> = [
  ['a malformed request line', 'GET /healthz x HTTP/1.1\r\n\r\n', 400, 'MALFORMED_REQUEST'],
  ['a control character in a header value', `GET /healthz HTTP/1.1\r\n${HOST}X-Note: a\x01b\r\n\r\n`, 400, 'MALFORMED_REQUEST'],
  ['a header without a colon', `GET /healthz HTTP/1.1\r\n${HOST}Just-a-name\r\n\r\n`, 400, 'MALFORMED_REQUEST'],
  ['HTTP/9.9', `GET /healthz HTTP/9.9\r\n${HOST}\r\n`, 400, 'MALFORMED_REQUEST'],
  ['a lower-case method', `get /healthz HTTP/1.1\r\n${HOST}\r\n`, 400, 'MALFORMED_REQUEST'],
  ['a method nobody knows', `FETCH /healthz HTTP/1.1\r\n${HOST}\r\n`, 400, 'MALFORMED_REQUEST'],
  ['both Content-Length and Transfer-Encoding', `POST /nowhere HTTP/1.1\r\n${HOST}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 400, 'MALFORMED_REQUEST'],
  ['a bad chunk', `POST /nowhere HTTP/1.1\r\n${HOST}Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`, 400, 'MALFORMED_REQUEST'],
  ['headers over 16 KiB', `GET /healthz HTTP/1.1\r\n${HOST}X-Padding: ${'a'.repeat(17_000)}\r\n\r\n`, 431, 'HEADERS_TOO_LARGE'],
  ['an HTTP/1.1 request without Host', 'GET /healthz HTTP/1.1\r\nOrigin: https://app.example\r\n\r\n', 400, 'MALFORMED_REQUEST'],
  ['an expectation other than 100-continue', `GET /healthz HTTP/1.1\r\n${HOST}Expect: 100-foo\r\n\r\n`, 417, 'EXPECTATION_FAILED'],
  ['a request line with no version (taken for HTTP/0.9)', `GET /profile/alice\r\n${HOST}\r\n`, 400, 'MALFORMED_REQUEST'],
  ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nOrigin: https://app.example\r\n\r\n', 404, 'NOT_FOUND']
]

for (const [what, request, status, code] of refused) {
  t.test(`${what}: ${status} ${code} on the contract, and the connection closed`, async (t) => {
    onContract(t, await exchange(port, request), status, code)
  })
}

t.test('a parser\'s message names what is wrong, never what the caller sent', async (t) => {
  const answer = await exchange(port, `GET /healthz HTTP/1.1\r\n${HOST}X-Secret: token\x01leak\r\n\r\n`)
  t.equal(JSON.parse(answer.body).message, 'The request is not valid HTTP/1.1: Invalid header value char')
  t.notMatch(answer.body, /token|leak/)
})

t.test('CONNECT to a path the service has answers 405 with Allow', async (t) => {
  const answer = await exchange(port, `CONNECT /profile/alice HTTP/1.1\r\n${HOST}\r\n`)
  onContract(t, answer, 405, 'METHOD_NOT_ALLOWED')
  t.equal(answer.headers.allow, 'GET, HEAD')
})

t.test('a request answered before its body was read, whose body then breaks the framing: that one answer, then the connection closes', async (t) => {
  // Shed before its body is read: under pressure from a heap limit every process exceeds.
  const { app, port: shedding } = await listening(t, {}, { loadShedding: { maxHeapUsedBytes: 1, sampleInterval: 10 } })
  const socketErrors: string[] = []
  app.server.on('connection', (socket: Socket) => socket.on('error', (error: NodeJS.ErrnoException) => socketErrors.push(error.code ?? error.message)))
  await eventually(async () => (await exchange(shedding, `GET /profile/alice HTTP/1.1\r\n${HOST}Connection: close\r\n\r\n`)).status === 503, 'shedding')
  const chunked = `POST /nowhere HTTP/1.1\r\n${HOST}Transfer-Encoding: chunked\r\n`
  const cases: Array<[string, number, string, string | string[]]> = [
    ['the bad chunk with the head', 503, 'SERVICE_OVERLOADED', `${chunked}\r\nzz\r\nabc\r\n0\r\n\r\n`],
    ['the bad chunk once the answer is out', 503, 'SERVICE_OVERLOADED', [`${chunked}\r\n`, 'zz\r\nabc\r\n0\r\n\r\n']],
    ['an answer that closes the connection itself (no Host)', 400, 'MALFORMED_REQUEST', 'POST /nowhere HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n'],
    ['an unmet expectation', 417, 'EXPECTATION_FAILED', `${chunked}Expect: 100-foo\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`]
  ]
  for (const [what, status, code, request] of cases) {
    const answer = typeof request === 'string' ? await exchange(shedding, request) : await afterFirstAnswer(shedding, request)
    t.equal(answer.status, status, what)
    t.equal(answer.body.length, Number(answer.headers['content-length']), `${what}: one answer, nothing after it`)
    t.equal((JSON.parse(answer.body) as { code: string }).code, code, what)
    t.equal(answer.error, undefined, `${what}: closed without a reset`)
  }
  t.same(socketErrors, [], 'no write on a connection its answer had closed')
})

/** Writes `first`, waits for the server's first bytes (its answer), then writes `second`; reads until the server closes. */
async function afterFirstAnswer (port: number, [first, second]: string[]): Promise<RawExchange> {
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  let error: string | undefined
  socket.on('error', (failure: NodeJS.ErrnoException) => { error = failure.code })
  const closed = once(socket, 'close')
  socket.write(first ?? '')
  const [answered] = await once(socket, 'data') as [Buffer]
  chunks.push(answered)
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  if (socket.writable) socket.write(second ?? '')
  await closed
  const text = Buffer.concat(chunks).toString('latin1')
  const end = text.indexOf('\r\n\r\n')
  const headers = Object.fromEntries(text.slice(0, end).split('\r\n').slice(1).map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
  return { status: Number(text.split(' ')[1]), headers, body: text.slice(end + 4), ...(error !== undefined && { error }) }
}

t.test('a POST too large gets its 413 whole, and the connection ends without a reset while the client still sends', async (t) => {
  // Sent in 64 KiB parts, as a client does: the server answers at the first. 16 MiB is more than loopback's
  // socket buffers hold, so a server closing without reading the rest would reset the connection (EPIPE here).
  for (const [target, mebibytes] of [['/admin/purge/alice', 2], ['/nowhere', 2], ['/nowhere', 16]] as const) {
    const head = `POST ${target} HTTP/1.1\r\n${HOST}Authorization: Bearer edge-admin-token\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${mebibytes * 1024 * 1024}\r\n\r\n`
    const part = Buffer.alloc(65_536, 'x')
    const answer = await exchange(port, [head, ...Array.from({ length: mebibytes * 16 }, () => part)])
    onContract(t, answer, 413, 'PAYLOAD_TOO_LARGE')
    t.equal(JSON.parse(answer.body).message, 'Request body is too large', `${target}, ${mebibytes} MiB`)
  }
})

t.test('an expectation of 100-continue is met', async (t) => {
  const answer = await exchange(port, `GET /healthz HTTP/1.1\r\n${HOST}Expect: 100-continue\r\nConnection: close\r\n\r\n`)
  t.equal(answer.status, 100, 'the interim answer first')
  t.match(answer.body, /^HTTP\/1\.1 200 OK\r\n/)
})

t.test('with a list of origins, raw answers carry @fastify/cors\'s headers: the origin named for CONNECT, none for an unreadable request', async (t) => {
  const listed = await listeningApp(t, { CORS_ORIGINS: 'https://a.example' })
  const connect = await exchange(listed, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nOrigin: https://a.example\r\n\r\n')
  t.equal(connect.status, 404)
  t.equal(connect.headers['access-control-allow-origin'], 'https://a.example')
  t.match(connect.headers.vary, /origin/i)
  const malformed = await exchange(listed, 'GET /healthz HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\nX-Bad: \x01\r\n\r\n')
  t.equal(malformed.status, 400)
  t.equal(malformed.headers['access-control-allow-origin'], undefined, 'a request the parser refused has no Origin to trust')
  t.match(malformed.headers.vary, /origin/i, 'caches keep it apart from answers to an origin')
  t.match(malformed.headers['access-control-expose-headers'], /x-request-id/)
})

/** Writes `request` (pipelined requests) on one connection at once, and splits what comes back, until the server closes, into answers. */
async function pipelined (port: number, request: string): Promise<RawExchange[]> {
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.write(request)
  await once(socket, 'close')
  const answers: RawExchange[] = []
  for (let rest = Buffer.concat(chunks).toString('latin1'); rest.length > 0;) {
    const end = rest.indexOf('\r\n\r\n')
    const [statusLine = '', ...lines] = rest.slice(0, end < 0 ? rest.length : end).split('\r\n')
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
    const length = end < 0 ? rest.length : Number(headers['content-length'] ?? 0)
    answers.push({ status: Number(statusLine.split(' ')[1]), headers, body: rest.slice(end + 4, end + 4 + length) })
    rest = end < 0 ? '' : rest.slice(end + 4 + length)
  }
  return answers
}

const GOOD = `GET /healthz HTTP/1.1\r\n${HOST}\r\n`
const PURGE = `POST /admin/purge/someone-else HTTP/1.1\r\n${HOST}Authorization: Bearer edge-admin-token\r\nContent-Type: application/json\r\n`

t.test('pipelined requests are answered in order: a refusal, or a CONNECT\'s 404, waits for the answers owed before it', async (t) => {
  t.equal((await exchange(port, `GET /profile/alice HTTP/1.1\r\n${HOST}Connection: close\r\n\r\n`)).status, 200, 'alice is cached')
  const hit = `GET /profile/alice HTTP/1.1\r\n${HOST}\r\n`
  const cases: Array<[string, string, number[], string]> = [
    ['good then a header without a colon', GOOD + `GET /profile/bob HTTP/1.1\r\n${HOST}Broken\r\n\r\n`, [200, 400], 'MALFORMED_REQUEST'],
    ['good then CONNECT', GOOD + 'CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\nOrigin: https://app.example\r\n\r\n', [200, 404], 'NOT_FOUND'],
    ['a body longer than its Content-Length', `${PURGE}Content-Length: 2\r\n\r\n{}GARBAGE\r\n\r\n`, [200, 400], 'MALFORMED_REQUEST'],
    // Both hits are answered within Fastify's listener; the second waits behind the first before it reaches the socket.
    ['two hits then garbage', `${hit}${hit}GARBAGE\r\n\r\n`, [200, 200, 400], 'MALFORMED_REQUEST']
  ]
  for (const [what, request, statuses, code] of cases) {
    const answers = await pipelined(port, request)
    t.same(answers.map((answer) => answer.status), statuses, what)
    const last = answers.at(-1)
    if (last !== undefined) onContract(t, last, statuses.at(-1) ?? 0, code)
    t.ok(answers.slice(0, -1).every((answer) => answer.headers.connection === 'keep-alive'), 'the first answers keep the connection')
  }
})

t.test('with a slow upstream, a refused request pipelined after a miss is answered after it', async (t) => {
  const { app, sim } = await stack(t, { env: { ADMIN_TOKEN: 'edge-admin-token' }, sim: { latencyMs: 300 } })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port: slow } = app.server.address() as { port: number }
  const miss = (username: string): string => `GET /profile/${username} HTTP/1.1\r\n${HOST}\r\n`
  const cases: Array<[string, string, number]> = [
    ['garbage', `${miss('cold-1')}GARBAGE\r\n\r\n`, 400],
    // The refused request is one its route was reading: its answer is the refusal, never awaited.
    ['a bad chunk in the body of the next', `${miss('cold-2')}${PURGE}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, 400],
    ['CONNECT', `${miss('cold-3')}CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\nOrigin: https://app.example\r\n\r\n`, 404]
  ]
  for (const [what, request, status] of cases) {
    const answers = await pipelined(slow, request)
    t.same(answers.map((answer) => [answer.status, answer.headers['x-cache']]), [[200, 'MISS'], [status, undefined]], what)
    t.equal(Object.keys((JSON.parse(answers[0]?.body ?? '{}') as { user?: object }).user ?? {}).length, 10, 'the profile, whole')
  }
  t.equal(sim.callsFor('profile', 'cold-1'), 1)
})

t.test('a client that resets its connection while a CONNECT\'s answer waits behind a miss takes nothing down', async (t) => {
  const { app, sim } = await stack(t, { sim: { latencyMs: 200 } })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const socket = connect((app.server.address() as { port: number }).port, '127.0.0.1')
  socket.write(`GET /profile/resetter HTTP/1.1\r\n${HOST}\r\nCONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n`)
  await eventually(() => sim.callsFor('profile', 'resetter') === 1, 'the miss is at the upstream')
  socket.resetAndDestroy()
  // The miss's answer is then written to a reset connection: the socket node:http handed over errs.
  await eventually(async () => await new Promise<boolean>((resolve) => app.server.getConnections((_, n) => { resolve(n === 0) })), 'the connection is gone')
  t.equal((await app.inject('/profile/resetter')).statusCode, 200, 'the process still serves')
})

t.test('at LOG_LEVEL=info every edge is answered and logged under the id it was answered with; a CONNECT by method and status', async (t) => {
  const { logger, lines } = capturedLogger()
  const logged = await listeningApp(t, {}, { logger: { ...logger, level: 'info' } })
  for (const [what, request, status] of refused) {
    const answer = await exchange(logged, request)
    t.equal(answer.status, status, what)
    await eventually(() => lines.some((line) => line.reqId === answer.headers['x-request-id'] && line.level === 30), `${what}: logged`)
  }
  const connects = lines.filter((line) => line.msg.startsWith('CONNECT answered'))
  t.match(connects, [{ method: 'CONNECT', statusCode: 404, reqId: String }])
  t.notOk('req' in (connects[0] ?? {}), 'no request object: it has no URL')
  t.match(lines.find((line) => line.msg === 'request refused by the HTTP parser'), { code: 'HPE_INVALID_CONSTANT', statusCode: 400 })
})

/** The error table of docs/reference.md, as `<status> <code>` pairs. */
const REFERENCE_TABLE = new Set([...readFileSync(new URL('../../../docs/reference.md', import.meta.url), 'utf8')
  .matchAll(/^\|.*\|\s*([45]\d\d)\s*\|\s*`([A-Z_]+)`/gm)].map(([, status, code]) => `${status} ${code}`))

t.test('the client errors Fastify and its plugins raise are answered under a status and code of the reference\'s table', async (t) => {
  const file = '/docs/static/swagger-ui.css'
  const cases: Array<[string, string, number, string]> = [
    ['a body that is not JSON', `${PURGE}Content-Length: 3\r\n\r\n{x}`, 400, 'BAD_REQUEST'],
    ['a body with no Content-Type', `${PURGE.replace('Content-Type: application/json\r\n', '')}Content-Length: 2\r\n\r\n{}`, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['a body of another type', `${PURGE.replace('application/json', 'application/xml')}Content-Length: 4\r\n\r\n<a/>`, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['a docs file by a path with a NUL', `GET /docs/static/%00x HTTP/1.1\r\n${HOST}\r\n`, 403, 'FORBIDDEN'],
    ['a docs file with a failed If-Match', `GET ${file} HTTP/1.1\r\n${HOST}If-Match: "nope"\r\n\r\n`, 412, 'PRECONDITION_FAILED'],
    ['a docs file with a Range past its end', `GET ${file} HTTP/1.1\r\n${HOST}Range: bytes=99999999-\r\n\r\n`, 416, 'RANGE_NOT_SATISFIABLE']
  ]
  for (const [what, request, status, code] of cases) {
    const answer = await exchange(port, request.replace(HOST, `${HOST}Connection: close\r\n`))
    t.match(JSON.parse(answer.body), { statusCode: status, code }, what)
    t.ok(REFERENCE_TABLE.has(`${status} ${code}`), `${status} ${code} is in the reference's table`)
  }
  t.match(errorResponse({ statusCode: 418, message: 'short and stout' }), { statusCode: 400, code: 'BAD_REQUEST' }, 'any other client error')
})
