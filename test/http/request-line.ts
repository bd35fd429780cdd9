import t from 'tap'
import { exchange, listeningApp } from '../ops/raw-http.ts'

// Request lines up to 8,000 octets are accepted (RFC 9110, 4.1): any username in one is answered as a username.

const port = await listeningApp(t)

/** `GET <target> HTTP/1.1`, answered and closed. */
async function get (target: string): Promise<Awaited<ReturnType<typeof exchange>>> {
  return await exchange(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
}

/** A target whose request line (`GET <target> HTTP/1.1`) is exactly `octets` long. */
function targetOf (octets: number, prefix: string, suffix = ''): string {
  return `${prefix}${'u'.repeat(octets - 'GET  HTTP/1.1'.length - prefix.length - suffix.length)}${suffix}`
}

t.test('a username of 1,537 characters is an invalid username, not a URI too long', async (t) => {
  const answer = await get(`/profile/${'u'.repeat(1537)}`)
  t.equal(answer.status, 400)
  t.equal(JSON.parse(answer.body).code, 'INVALID_USERNAME')
})

t.test('request lines of 7,999 and 8,000 octets reach the schema: 400 INVALID_USERNAME on every username route', async (t) => {
  for (const octets of [7_999, 8_000]) {
    for (const [prefix, suffix] of [['/profile/', ''], ['/profile/', '/timeline'], ['/user/', '?query=name']] as const) {
      const target = targetOf(octets, prefix, suffix)
      const answer = await get(target)
      t.equal(`GET ${target} HTTP/1.1`.length, octets)
      t.equal(answer.status, 400, `${octets} octets, ${prefix}…${suffix}`)
      t.same(JSON.parse(answer.body), {
        statusCode: 400, code: 'INVALID_USERNAME', error: 'Bad Request', message: 'username must be 1 to 128 characters, not "." or "..", without control characters'
      })
    }
  }
})

t.test('a request line of 8,001 octets or more answers 414 URI_TOO_LONG on the contract, whatever its route', async (t) => {
  for (const target of [
    targetOf(8_001, '/profile/'), targetOf(8_001, '/user/', '?query=name'), targetOf(8_001, '/user/alice?query='),
    targetOf(8_001, '/nowhere/'), targetOf(12_000, '/profile/')
  ]) {
    const answer = await get(target)
    t.equal(answer.status, 414, `${target.length} characters: ${target.slice(0, 12)}…`)
    t.same(JSON.parse(answer.body), { statusCode: 414, code: 'URI_TOO_LONG', error: 'URI Too Long', message: 'The request line is longer than 8000 octets' })
    t.match(answer.headers['x-request-id'], /\S/)
    t.equal(answer.headers['access-control-allow-origin'], '*')
    t.equal(answer.headers['x-content-type-options'], 'nosniff')
    t.equal(answer.headers['cache-control'], 'no-store')
  }
})
