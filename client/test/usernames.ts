import t from 'tap'
import { createClient } from '../src/index.ts'
import { failure, fakeFetch } from './helpers.ts'

const LONE_SURROGATE = 'a\uD800b'

t.test('a username that cannot travel intact throws INVALID_USERNAME before any request', async (t) => {
  const { fetch, requests } = fakeFetch()
  const client = createClient({ baseUrl: 'http://bff.test', fetch })
  // fetch's URL parser resolves `.` and `..` (even `%2E`): timeline('.') reached /profile/timeline, profile('..') a 404.
  for (const username of ['.', '..', LONE_SURROGATE]) {
    for (const call of [client.profile(username), client.timeline(username), client.field(username, 'name')]) {
      const error = await failure(call)
      t.equal(error.code, 'INVALID_USERNAME', JSON.stringify(username))
      t.equal(error.statusCode, 400)
    }
  }
  // URLSearchParams would have sent U+FFFD: another member.
  t.equal((await failure(client.profiles(['alice', '\uDC00']))).code, 'INVALID_USERNAME')
  t.same(requests, [], 'nothing was sent')
})

t.test('the service judges every other username: dots within a name and surrogate pairs travel encoded', async (t) => {
  const { fetch, requests } = fakeFetch()
  const client = createClient({ baseUrl: 'http://bff.test', fetch })
  await client.profile('...')
  await client.timeline('.a')
  await client.field('🦊', 'name')
  await client.profiles(['.', '..', '🦊'])
  t.same(requests.map(({ url }) => url), [
    'http://bff.test/profile/...',
    'http://bff.test/profile/.a/timeline',
    'http://bff.test/user/%F0%9F%A6%8A?query=name',
    'http://bff.test/profiles?username=.&username=..&username=%F0%9F%A6%8A'
  ])
})
