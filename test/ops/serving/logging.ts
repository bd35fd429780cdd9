import Fastify from 'fastify'
import { pino, type Logger } from 'pino'
import t from 'tap'
import { BatchedLogOutput, loggerOptions, OneLinePerRequest } from '../../../src/logging/logging.ts'
import { capturedLogger, stack, type LogLine } from '../../helper.ts'

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
  // A 200 that is not JSON and echoes what it was sent: the parser's message would quote it.
  sim.failNext({ kind: 'invalid-json', body: 'sim_echoed-bearer-token' })
  t.equal((await app.inject({ url: '/profile/erin', headers })).statusCode, 502)
  sim.failTokenNext({ kind: 'status', status: 401 })
  sim.revokeTokens()
  t.equal((await app.inject({ url: '/profile/dave/timeline', headers })).statusCode, 502, 'the identity provider refuses')
  t.equal(sim.stats.tokensIssued, 2)

  const text = raw.join('\n')
  t.equal(new Set(lines.map((line) => line.reqId).filter(Boolean)).size, 5, 'the log speaks of each of the five requests checked below')
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

/** An error as an HTTP or Redis client builds it: what it was asked to do rides along on the error. */
function errorCarryingCredentials (): Error {
  const redisError = Object.assign(new Error('ERR write failed'), {
    code: 'ERR',
    command: { name: 'set', args: ['pbff:token', 'sim_leak1'] }
  })
  const refused = new AggregateError([
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED', address: 'sim_leak2' })
  ], '')
  const fetchError = new Error('fetch failed', { cause: refused })
  return Object.assign(new Error('upstream call failed', { cause: redisError }), {
    statusCode: 502,
    options: { headers: { authorization: 'Bearer sim_leak3', cookie: 'a=leak4' }, body: 'client_secret=leak5' },
    response: { headers: { 'set-cookie': 'b=leak6' }, body: { access_token: 'sim_leak7' } },
    token: 'sim_leak8',
    errors: [fetchError]
  })
}

t.test('an error reaches a log line as its type, message, code, status, stack and causes only', async (t) => {
  const { logger, lines, raw } = capturedLogger()
  const { app } = await stack(t, { logger })
  app.log.warn({ err: errorCarryingCredentials() }, 'probe-err')
  app.log.error(errorCarryingCredentials())
  app.log.warn({ err: { headers: { authorization: 'Bearer sim_leak9' } } }, 'probe-non-error')

  t.notMatch(raw.join('\n'), /leak/, 'nothing the errors carried besides those fields')
  const err = lines.find((line) => line.msg === 'probe-err')?.err as Record<string, unknown> & { cause: Record<string, unknown> }
  t.same(Object.keys(err).sort(), ['cause', 'message', 'stack', 'statusCode', 'type'])
  t.match(err, { type: 'Error', message: 'upstream call failed', statusCode: 502, stack: /^Error: upstream call failed\n\s+at / })
  t.same(Object.keys(err.cause).sort(), ['code', 'message', 'stack', 'type'], 'the cause the same way')
  t.match(err.cause, { message: 'ERR write failed', code: 'ERR' })
  t.equal(lines.find((line) => line.msg === 'upstream call failed')?.level, 50, 'an error logged bare goes through the same serializer')
  t.same(lines.find((line) => line.msg === 'probe-non-error')?.err, { type: 'object', message: 'a non-error was thrown', stack: '' })
})

t.test('causes and aggregated errors are followed three deep, the first three of an aggregate', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app } = await stack(t, { logger })
  let chain = new Error('depth 5')
  for (let depth = 4; depth >= 0; depth--) chain = new Error(`depth ${depth}`, { cause: chain })
  const refused = (port: number) => Object.assign(new Error(`connect ECONNREFUSED 127.0.0.1:${port}`), { code: 'ECONNREFUSED' })
  app.log.warn({ err: chain }, 'chain')
  app.log.warn({ err: new AggregateError([1, 2, 3, 4].map(refused), 'all refused') }, 'aggregate')

  type Logged = { message: string, cause?: Logged, errors?: Logged[] }
  const messages: string[] = []
  for (let err = lines.find((line) => line.msg === 'chain')?.err as Logged | undefined; err; err = err.cause) messages.push(err.message)
  t.same(messages, ['depth 0', 'depth 1', 'depth 2', 'depth 3'])
  const aggregate = lines.find((line) => line.msg === 'aggregate')?.err as Logged & { type: string }
  t.equal(aggregate.type, 'AggregateError')
  t.same(aggregate.errors?.map((each) => each.message), [1, 2, 3].map((port) => `connect ECONNREFUSED 127.0.0.1:${port}`))
})

t.test('a request Fastify logs itself is named by method, censored URL and address, never its headers', async (t) => {
  const { logger, lines, raw } = capturedLogger()
  const { app } = await stack(t, { logger })
  app.log.info({
    req: { method: 'GET', url: '/profile/alice?token=sim_leak1', ip: '10.0.0.1', headers: { authorization: 'Bearer sim_leak2' } },
    res: { statusCode: 200, headers: { 'set-cookie': 'a=leak3' } }
  }, 'probe')
  t.notMatch(raw.join('\n'), /leak/)
  const line = lines.find((entry) => entry.msg === 'probe')
  t.same(line?.req, { method: 'GET', url: '/profile/alice?token=[redacted]', remoteAddress: '10.0.0.1' })
  t.same(line?.res, { statusCode: 200 })
})

t.test('the request serializer never throws: a request with no URL (node:http\'s CONNECT) or no fields is named by what it has', async (t) => {
  const written: string[] = []
  const log = pinoInto(written)
  for (const req of [{ method: 'CONNECT' }, {}, null, { url: 42 }]) t.doesNotThrow(() => { log.info({ req }, 'edge') }, JSON.stringify(req))
  t.same(written.map((line) => JSON.parse(line).req), [{ method: 'CONNECT' }, {}, {}, {}])
})

t.test('a credential a client put in the query string is censored in the request line', async (t) => {
  const { logger, lines, raw } = capturedLogger()
  const { app } = await stack(t, { logger })
  await app.inject('/user/alice?query=name&access_token=sim_q1&api%5Fkey=q2&Session=q3&page=2')
  const line = lines.find((entry) => entry.msg === 'request completed')
  t.equal(line?.url, '/user/alice?query=name&access_token=[redacted]&api%5Fkey=[redacted]&Session=[redacted]&page=2')
  t.notMatch(raw.join('\n'), /sim_q1|q2|q3/)
})

t.test('off a terminal, lines are written together: after a delay, or at once when the next might not fit', async (t) => {
  const writes: string[] = []
  const timers: Array<{ flush: () => void, ms: number }> = []
  // 48 bytes: room for a 12-character line is counted as 36 (3 bytes a character at most).
  const output = new BatchedLogOutput({ write: (bytes: Uint8Array) => writes.push(Buffer.from(bytes).toString()) }, {
    maxBytes: 48,
    maxDelayMs: 100,
    schedule: (flush, ms) => timers.push({ flush, ms })
  })
  output.write('{"msg":"a"}\n')
  output.write('{"msg":"b"}\n')
  t.same(writes, [], 'nothing written before the delay')
  t.same(timers.map(({ ms }) => ms), [100], 'one timer for the batch, however many lines')
  timers[0]?.flush()
  t.same(writes, ['{"msg":"a"}\n{"msg":"b"}\n'], 'one write for the batch, in order')
  output.write('{"msg":"c"}\n')
  output.write('{"msg":"d"}\n')
  output.write('{"msg":"é"}\n')
  t.same(writes.slice(1), ['{"msg":"c"}\n{"msg":"d"}\n'], 'written at once when the next line might not fit, without waiting')
  t.equal(timers.length, 2, 'the next batch has its timer')
  output.write(`{"msg":"${'x'.repeat(20)}"}\n`)
  t.same(writes.slice(2), ['{"msg":"é"}\n', `{"msg":"${'x'.repeat(20)}"}\n`], 'a line larger than a batch goes on its own, after those before it')
  output.write('{"msg":"f"}\n')
  output.flush()
  t.same(writes.slice(4), ['{"msg":"f"}\n'], 'flushed on demand (the exit listener)')
  timers[1]?.flush()
  t.equal(writes.length, 5, 'nothing written twice, no empty write')
})

t.test('the access line: one per request, its fields and nothing else, under the request id, no secret', async (t) => {
  const { logger, lines, raw } = capturedLogger()
  const { app } = await stack(t, { logger })
  const headers = { authorization: USER_AUTHORIZATION, cookie: USER_COOKIE }
  await app.inject({ url: '/user/alice?query=name&access_token=sim_a1', headers })
  const hit = await app.inject({ url: '/user/alice?query=name&access_token=sim_a1', headers: { ...headers, 'x-request-id': 'lb-77' } })
  t.equal(hit.headers['x-cache'], 'HIT')

  const ofHit = lines.filter((line) => line.reqId === 'lb-77')
  t.equal(ofHit.length, 1, 'a hit logs its access line and nothing else')
  const line = ofHit[0] ?? { level: 0, msg: '' }
  t.same(Object.keys(line).sort(),
    ['hostname', 'level', 'method', 'msg', 'pid', 'remoteAddress', 'reqId', 'responseTime', 'statusCode', 'time', 'url', 'xCache'])
  t.match(line, {
    level: 30,
    msg: 'request completed',
    method: 'GET',
    url: '/user/alice?query=name&access_token=[redacted]',
    statusCode: 200,
    remoteAddress: '127.0.0.1',
    xCache: 'HIT',
    responseTime: Number
  })
  t.equal(lines.filter((entry) => entry.msg === 'request completed').length, 2, 'one line for each of the two requests')
  t.notMatch(raw.join('\n'), /sim_a1|user-jwt-3f9c|cookie-77ab/, 'neither the query\'s token nor a credential header')
})

t.test('the access line keeps to the logger: nothing below LOG_LEVEL, a route\'s own level and serializers apply', async (t) => {
  const { logger, lines } = capturedLogger()
  const { app } = await stack(t, { logger: { ...logger, level: 'warn' } })
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
  t.same(lines.filter((line) => line.msg === 'request completed'), [], 'LOG_LEVEL=warn: no access line')

  const written: string[] = []
  const bare = Fastify({ loggerInstance: pinoInto(written), logController: new OneLinePerRequest() })
  t.teardown(() => bare.close())
  bare.get('/plain', async () => 'ok')
  bare.get('/quiet', { logLevel: 'warn' }, async () => 'ok')
  bare.get('/masked', { logSerializers: { url: () => '[masked]' } }, async () => 'ok')
  for (const url of ['/plain', '/quiet', '/masked']) await bare.inject(url)
  const completed = written.map((text) => JSON.parse(text) as LogLine).filter((line) => line.msg === 'request completed')
  t.same(completed.map(({ url }) => url), ['/plain', '[masked]'])
})

t.test('request.log is the request\'s pino child: every level, its children and pino\'s own methods, under its reqId', async (t) => {
  const written: string[] = []
  const app = Fastify({ loggerInstance: pinoInto(written, 'trace'), logController: new OneLinePerRequest(), genReqId: () => 'r-1' })
  t.teardown(() => app.close())
  app.get('/', async (request) => {
    for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const) request.log[level]({ n: 1 }, level)
    request.log.child({ step: 'x' }).error('from a grandchild')
    const log = request.log as Logger
    return { enabled: log.isLevelEnabled('debug'), bindings: log.bindings() }
  })
  t.same((await app.inject('/')).json(), { enabled: true, bindings: { reqId: 'r-1' } })
  const lines = written.map((text) => JSON.parse(text) as LogLine)
  t.same(lines.map(({ reqId, level, msg }) => [reqId, level, msg]), [
    ['r-1', 10, 'trace'], ['r-1', 20, 'debug'], ['r-1', 30, 'info'], ['r-1', 40, 'warn'], ['r-1', 50, 'error'], ['r-1', 60, 'fatal'],
    ['r-1', 50, 'from a grandchild'], ['r-1', 30, 'request completed']
  ])
  t.equal(lines[6]?.step, 'x')
})

/** A pino logger with the service's options, its lines kept as written. */
function pinoInto (lines: string[], level = 'info'): Logger {
  return pino(loggerOptions(level), { write: (line: string) => { lines.push(line) } })
}
