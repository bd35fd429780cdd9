import { Writable } from 'node:stream'
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import { loadConfig } from '../../src/config.ts'
import { INVALID_USERNAME, RATE_LIMITED, SHUTTING_DOWN, UPSTREAM_ERROR, UPSTREAM_TIMEOUT } from '../../src/errors.ts'
import configPlugin from '../../src/plugins/config.ts'
import answerHeaders from '../../src/plugins/answer-headers.ts'
import errorHandler from '../../src/plugins/error-handler.ts'

/** An app with the real error handler whose routes throw the given errors, and the log lines it writes. */
async function app (t: { teardown: (fn: () => unknown) => void }, thrown: Record<string, () => Error>): Promise<{ server: FastifyInstance, levels: (msgOf: string) => number[] }> {
  const lines: Array<{ level: number, err?: { code?: string } }> = []
  const stream = new Writable({ write (chunk, _encoding, done) { lines.push(JSON.parse(String(chunk))); done() } })
  const config = loadConfig({ UPSTREAM_BASE_URL: 'http://127.0.0.1:1', AUTH_URL: 'http://127.0.0.1:1', CLIENT_ID: 'id', CLIENT_SECRET: 'secret' })
  const server = Fastify({ logger: { level: 'info', stream } })
  await server.register(configPlugin, { config })
  await server.register(answerHeaders)
  await server.register(errorHandler)
  for (const [path, error] of Object.entries(thrown)) server.get(path, async () => { throw error() })
  t.teardown(() => server.close())
  return { server, levels: (code) => lines.filter((line) => line.err?.code === code).map((line) => line.level) }
}

t.test('expected failures are logged at warn, unexpected 5xx at error, client errors not at all', async (t) => {
  const { server, levels } = await app(t, {
    '/upstream': () => new UPSTREAM_ERROR('status 500'),
    '/timeout': () => new UPSTREAM_TIMEOUT(5000),
    '/limited': () => new RATE_LIMITED(3),
    '/closing': () => new SHUTTING_DOWN(),
    '/bad': () => new INVALID_USERNAME()
  })
  t.equal((await server.inject('/upstream')).statusCode, 502)
  t.equal((await server.inject('/timeout')).statusCode, 504)
  t.equal((await server.inject('/limited')).statusCode, 429)
  t.equal((await server.inject('/closing')).statusCode, 503)
  t.equal((await server.inject('/bad')).statusCode, 400)
  t.same(levels('UPSTREAM_ERROR'), [40])
  t.same(levels('UPSTREAM_TIMEOUT'), [40])
  t.same(levels('RATE_LIMITED'), [40])
  t.same(levels('SHUTTING_DOWN'), [50], 'a 5xx not declared expected is an error')
  t.same(levels('INVALID_USERNAME'), [], 'a caller\'s mistake is not ours to log')
})
