import t, { type Test } from 'tap'
import { exchange, listeningApp, type RawExchange } from './raw-http.ts'

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
