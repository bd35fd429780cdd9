import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { stack } from '../helper.ts'

const INVALID_USERNAME = {
  statusCode: 400,
  code: 'INVALID_USERNAME',
  error: 'Bad Request',
  message: 'username must be 1 to 128 characters, not "." or "..", without control characters'
}

t.test('invalid usernames answer 400 INVALID_USERNAME and never reach the upstream', async (t) => {
  const { app, sim } = await stack(t)
  const segments = {
    empty: '',
    'too long (129 code points)': 'x'.repeat(129),
    'too long in emoji': encodeURIComponent('😀'.repeat(129)),
    'C0 control': 'a%01b',
    newline: 'a%0Ab',
    DEL: 'a%7Fb'
  }
  for (const [name, segment] of Object.entries(segments)) {
    for (const url of [`/profile/${segment}`, `/profile/${segment}/timeline`, `/user/${segment}?query=name`]) {
      const res = await app.inject(url)
      t.equal(res.statusCode, 400, `${name}: ${url.slice(0, 40)}`)
      t.same(res.json(), INVALID_USERNAME, name)
      t.equal(res.headers['cache-control'], 'no-store', name)
    }
  }
  t.equal(sim.stats.dataCalls, 0)
  t.equal(sim.stats.tokenRequests, 0)
})

t.test('"." and ".." as usernames answer 400 over the wire', async (t) => {
  // Only a raw request can carry them: URL parsers (inject's included) resolve dot segments, %2E too.
  const { app, sim } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  for (const segment of ['.', '..', '%2E', '%2e%2E']) {
    for (const path of [`/profile/${segment}`, `/profile/${segment}/timeline`, `/user/${segment}?query=name`]) {
      const { statusCode, body } = await rawGet(port, path)
      t.equal(statusCode, 400, path)
      t.same(JSON.parse(body), INVALID_USERNAME, path)
    }
  }
  t.equal(sim.stats.dataCalls, 0)
})

function rawGet (port: number, path: string): Promise<{ statusCode: number, body: string }> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (chunk: string) => { body += chunk })
      res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, body }))
    }).on('error', reject).end()
  })
}

t.test('a missing or unknown query answers 400 INVALID_FIELD listing the allowed values', async (t) => {
  const { app, sim } = await stack(t)
  for (const url of ['/user/alice', '/user/alice?query=', '/user/alice?query=email', '/user/alice?query=name&query=age']) {
    const res = await app.inject(url)
    t.equal(res.statusCode, 400, url)
    t.same(res.json(), {
      statusCode: 400,
      code: 'INVALID_FIELD',
      error: 'Bad Request',
      message: 'query must be one of: name, age, gender, location, credits, rank, videos, photos, joined, about'
    }, url)
  }
  t.equal(sim.stats.dataCalls, 0)
})

t.test('unknown routes answer 404 NOT_FOUND in the JSON error shape, whatever the method', async (t) => {
  const { app } = await stack(t)
  for (const [method, url] of [['GET', '/nope'], ['GET', '/profile/alice/posts'], ['POST', '/nope'], ['DELETE', '/user/alice/x']] as const) {
    const res = await app.inject({ method, url })
    t.equal(res.statusCode, 404, `${method} ${url}`)
    t.same(res.json(), { statusCode: 404, code: 'NOT_FOUND', error: 'Not Found', message: `Route ${method} ${url} not found` })
  }
})

t.test('a malformed URL answers 400 in the JSON error shape', async (t) => {
  const { app } = await stack(t)
  const res = await app.inject('/profile/%E0%A4%A')
  t.equal(res.statusCode, 400)
  t.match(res.json(), { statusCode: 400, code: 'BAD_REQUEST', error: 'Bad Request', message: String })
})

t.test('a malformed JSON body answers 400 in the JSON error shape', async (t) => {
  const { app } = await stack(t)
  const res = await app.inject({ method: 'OPTIONS', url: '/profile/alice', headers: { 'content-type': 'application/json' }, payload: '{oops' })
  t.ok([400, 404, 405].includes(res.statusCode))
  t.match(res.json(), { statusCode: res.statusCode, code: String, error: String, message: String })
})
