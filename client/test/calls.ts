import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { profileOf, timelineOf } from '../../dev/profiles.ts'
import { stack } from '../../test/helper.ts'
import { createClient, type ErrorCode, type ServiceErrorCode } from '../src/index.ts'
import { failure } from './helpers.ts'

async function listening (t: Test, env: Record<string, string> = {}) {
  const { app, sim } = await stack(t, { env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const baseUrl = `http://127.0.0.1:${port}/`
  return { sim, baseUrl, client: createClient({ baseUrl }) }
}

t.test('profile, timeline, field and batch, with the caching headers', async (t) => {
  const { client } = await listening(t)
  const profile = await client.profile('alice')
  t.same(profile.data, { user: profileOf('alice') })
  t.equal(profile.status, 200)
  t.equal(profile.cache, 'MISS')
  t.match(profile.serverTiming, /^cache;desc=MISS, upstream;dur=/)
  t.match(profile.etag, /^"/)
  t.match(profile.requestId, /\S/)
  t.same((await client.timeline('alice')).data, { posts: timelineOf('alice') })
  t.same((await client.field('alice', 'credits')).data, { Credits: profileOf('alice').Credits })
  // The document's `query` is an enum of the ten values: a typo does not compile (tsc checks this file), and the service refuses it.
  // @ts-expect-error 'credit' is not one of the ten fields
  t.equal((await failure(client.field('alice', 'credit'))).code, 'INVALID_FIELD')
  const batch = await client.profiles(['alice', 'bob', 'a,b', 'ghost-2'], { fields: ['name', 'age'] })
  t.same(Object.keys(batch.data.profiles), ['alice', 'bob', 'a,b'], 'a username holding a comma stays one username')
  t.same(batch.data.profiles.bob, { user: { name: profileOf('bob').name, age: profileOf('bob').age } })
  t.equal(batch.data.errors['ghost-2']?.code, 'PROFILE_NOT_FOUND')
})

t.test('a second call revalidates the version held: 304, the same data, no upstream call', async (t) => {
  const { client, sim } = await listening(t)
  const first = await client.profile('carol')
  const second = await client.profile('carol')
  t.equal(second.status, 304)
  t.same(second.data, first.data)
  t.equal(second.etag, first.etag)
  t.equal(second.cache, 'HIT')
  t.equal(sim.callsFor('profile', 'carol'), 1)
})

t.test('errors are thrown typed by code, with the request id and Retry-After', async (t) => {
  const { client } = await listening(t, { RATE_LIMIT_PER_MINUTE: '3' })
  const error = await failure(client.profile('ghost-9'))
  t.equal(error.code, 'PROFILE_NOT_FOUND')
  t.equal(error.statusCode, 404)
  t.equal(error.message, 'No profile for username ghost-9')
  t.match(error.requestId, /\S/)
  await client.profile('alice')
  await client.profile('bob')
  const limited = await failure(client.profile('carol'))
  t.equal(limited.code, 'RATE_LIMITED')
  t.ok(typeof limited.retryAfterSeconds === 'number' && limited.retryAfterSeconds > 0)
  const documented: ServiceErrorCode[] = ['INVALID_USERNAME', 'INVALID_FIELD', 'INVALID_BATCH', 'UPSTREAM_TIMEOUT']
  // @ts-expect-error a code the service does not document is not a ServiceErrorCode
  documented.push('NOT_A_CODE')
  t.equal(documented.length, 5)
})

t.test('a wrong baseUrl meets the service\'s NOT_FOUND, one of the typed codes', async (t) => {
  const { baseUrl } = await listening(t)
  const error = await failure(createClient({ baseUrl: `${baseUrl}api` }).profile('alice'))
  // Type-checked (tsc checks this file): NOT_FOUND was thrown, but was not an ErrorCode.
  const expected: ErrorCode = 'NOT_FOUND'
  t.equal(error.code, expected)
  t.equal(error.statusCode, 404)
})

t.test('no answer, or an answer that is not the service\'s, is an error too', async (t) => {
  const closed = createClient({ baseUrl: 'http://127.0.0.1:9' })
  const unreachable = await failure(closed.profile('alice'))
  t.equal(unreachable.code, 'NETWORK_ERROR')
  t.equal(unreachable.statusCode, 0)
  const proxy = createServer((_request, response) => response.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>'))
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => proxy.close())
  const html = createClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` })
  const unexpected = await failure(html.profile('alice'))
  t.equal(unexpected.code, 'UNEXPECTED_RESPONSE')
  t.equal(unexpected.statusCode, 502)
})
