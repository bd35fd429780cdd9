import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import { loadConfig } from '../../src/config.ts'
import { INVALID_BATCH, INVALID_USERNAME } from '../../src/errors.ts'
import { validationErrors } from '../../src/http/validation-errors.ts'
import configPlugin from '../../src/plugins/config.ts'
import answerHeaders from '../../src/plugins/answer-headers.ts'
import errorHandler from '../../src/plugins/error-handler.ts'

/** An app with the real error handler and two routes of its own: one declares its codes, one does not. */
async function app (t: { teardown: (fn: () => unknown) => void }): Promise<FastifyInstance> {
  const config = loadConfig({ UPSTREAM_BASE_URL: 'http://127.0.0.1:1', AUTH_URL: 'http://127.0.0.1:1', CLIENT_ID: 'id', CLIENT_SECRET: 'secret' })
  const app = Fastify()
  await app.register(configPlugin, { config })
  await app.register(answerHeaders)
  await app.register(errorHandler)
  const schema = {
    params: { type: 'object', properties: { id: { type: 'integer' } } },
    querystring: { type: 'object', properties: { page: { type: 'integer' } } }
  }
  app.get('/declared/:id', { schema, schemaErrorFormatter: validationErrors({ params: () => new INVALID_USERNAME(), querystring: () => new INVALID_BATCH(0) }) }, async () => ({}))
  app.get('/plain/:id', { schema }, async () => ({}))
  t.teardown(() => app.close())
  return app
}

t.test('a route\'s validation errors answer the codes it declares, per part', async (t) => {
  const server = await app(t)
  const params = await server.inject('/declared/x')
  t.equal(params.statusCode, 400)
  t.equal(params.json().code, 'INVALID_USERNAME')
  const query = await server.inject('/declared/1?page=x')
  t.equal(query.statusCode, 400)
  t.equal(query.json().code, 'INVALID_BATCH')
  t.equal((await server.inject('/declared/1?page=2')).statusCode, 200)
})

t.test('a route that declares none answers a plain 400, never another route\'s code', async (t) => {
  const server = await app(t)
  for (const url of ['/plain/x', '/plain/1?page=x']) {
    const res = await server.inject(url)
    t.equal(res.statusCode, 400, url)
    t.match(res.json(), { statusCode: 400, code: 'BAD_REQUEST', error: 'Bad Request' }, url)
    t.notMatch(res.json().code, /INVALID_(FIELD|USERNAME)/, url)
  }
})

t.test('a part a declaring route leaves out keeps the plain 400', async (t) => {
  const server = Fastify()
  server.get('/half/:id', {
    schema: { params: { type: 'object', properties: { id: { type: 'integer' } } }, querystring: { type: 'object', properties: { page: { type: 'integer' } } } },
    schemaErrorFormatter: validationErrors({ params: () => new INVALID_USERNAME() })
  }, async () => ({}))
  t.teardown(() => server.close())
  const res = await server.inject('/half/1?page=x')
  t.equal(res.statusCode, 400)
  t.match(res.json().message, /^querystring\/page must be integer/)
})
