import { Writable } from 'node:stream'
import t from 'tap'
import { loggerOptions } from '../../src/logging.js'
import { stack } from '../helper.js'

type Line = Record<string, unknown> & { level: number, msg: string, reqId?: string }

/** The service's own logger options, writing into an array instead of stdout. */
function capturedLogger () {
  const lines: Line[] = []
  const raw: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        raw.push(line)
        lines.push(JSON.parse(line) as Line)
      }
      done()
    }
  })
  return { logger: { ...loggerOptions('debug'), stream }, lines, raw }
}

const USER_AUTHORIZATION = 'Bearer user-jwt-3f9c'
const USER_COOKIE = 'session=cookie-77ab'

t.test('token exchanges, upstream failures and credentialed requests leave no secret or token in the log', async (t) => {
  const { logger, lines, raw } = capturedLogger()
  const { app, sim, config } = await stack(t, { logger })
  const headers = { authorization: USER_AUTHORIZATION, cookie: USER_COOKIE }

  t.equal((await app.inject({ url: '/profile/alice', headers })).statusCode, 200)
  sim.revokeTokens()
  t.equal((await app.inject({ url: '/profile/bob', headers })).statusCode, 200, 'refused token, renewed, retried')
  sim.failNext({ kind: 'status', status: 500 })
  t.equal((await app.inject({ url: '/profile/carol', headers })).statusCode, 502)
  sim.failTokenNext({ kind: 'status', status: 401 })
  sim.revokeTokens()
  t.equal((await app.inject({ url: '/profile/dave/timeline', headers })).statusCode, 502, 'the identity provider refuses')
  t.equal(sim.stats.tokensIssued, 2)

  const text = raw.join('\n')
  t.ok(text.length > 0)
  t.notMatch(text, config.CLIENT_SECRET, 'the client secret never appears')
  t.notMatch(text, /sim_/, 'no issued token appears')
  t.notMatch(text, 'user-jwt-3f9c', 'nor a caller\'s Authorization')
  t.notMatch(text, 'cookie-77ab', 'nor a caller\'s cookie')

  const minted = lines.filter((line) => line.level === 30 && line.msg === 'upstream token minted')
  t.equal(minted.length, 2, 'one info line per token minted')
  t.ok(lines.some((line) => line.level === 40 && /upstream call failed/.test(line.msg)), 'warn for the upstream failure')
  t.ok(lines.some((line) => line.level === 40 && /token exchange failed/.test(line.msg)), 'warn for the failed exchange')
})

t.test('one line per request, with its request id, joining every line the request caused', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app, sim } = await stack(t, { logger })
  sim.failNext({ kind: 'status', status: 500 })
  const failed = await app.inject('/profile/erin')
  const ok = await app.inject({ url: '/profile/frank', headers: { 'x-request-id': 'lb-1234' } })
  await app.inject('/nowhere')

  const completed = lines.filter((line) => line.msg === 'request completed')
  t.equal(completed.length, 3)
  t.same(completed.map((line) => [line.method, line.url, line.statusCode]),
    [['GET', '/profile/erin', 502], ['GET', '/profile/frank', 200], ['GET', '/nowhere', 404]])
  t.ok(completed.every((line) => typeof line.responseTime === 'number'))
  t.equal(completed[1]?.xCache, 'MISS')
  t.equal(completed[1]?.reqId, 'lb-1234', 'the balancer\'s id is kept')
  t.equal(new Set(completed.map((line) => line.reqId)).size, 3)
  t.equal(lines.filter((line) => line.msg === 'incoming request').length, 0, 'not Fastify\'s second line')

  const failedId = failed.headers['x-request-id']
  t.equal(completed[0]?.reqId, failedId, 'the caller gets the id back')
  const sameRequest = lines.filter((line) => line.reqId === failedId).map((line) => line.msg)
  t.ok(sameRequest.length >= 2, `the failure and its request line share the id: ${sameRequest.join(' | ')}`)
  t.equal(ok.statusCode, 200)
})

t.test('the redaction net: credentials under the usual names are censored wherever a log call puts them', async (t) => {
  const { logger, raw } = capturedLogger()
  const { app } = await stack(t, { logger })
  app.log.info({
    upstreamRequest: { headers: { authorization: 'Bearer sim_leak1', cookie: 'a=leak2', 'set-cookie': 'b=leak3' } },
    token: 'sim_leak4',
    answer: { access_token: 'sim_leak5', client_secret: 'leak6' },
    options: { clientSecret: 'leak7' }
  }, 'probe')
  const line = raw.find((text) => text.includes('"probe"')) ?? ''
  t.notMatch(line, /leak/)
  t.equal(line.match(/\[redacted\]/g)?.length, 7)
})

t.test('a credential a client put in the query string is censored in the request line', async (t) => {
  const { logger, lines, raw } = capturedLogger()
  const { app } = await stack(t, { logger })
  await app.inject('/user/alice?query=name&access_token=sim_q1&api%5Fkey=q2&Session=q3&page=2')
  const line = lines.find((entry) => entry.msg === 'request completed')
  t.equal(line?.url, '/user/alice?query=name&access_token=[redacted]&api%5Fkey=[redacted]&Session=[redacted]&page=2')
  t.notMatch(raw.join('\n'), /sim_q1|q2|q3/)
})
