import t from 'tap'
import { createClient } from '../src/index.ts'
import { fakeFetch } from './helpers.ts'

const ETAG = '"v1"'
const BODY = { user: { name: 'Alice Moreau' } }

/** A service holding one version: 304 when it is the one named in If-None-Match. */
const oneVersion = () => fakeFetch(({ init }) => new Headers(init?.headers).get('if-none-match') === ETAG
  ? new Response(null, { status: 304, headers: { etag: ETAG } })
  : Response.json(BODY, { headers: { etag: ETAG } }))

t.test('each answer is a copy of its own: a caller editing its data changes no later answer', async (t) => {
  const client = createClient({ baseUrl: 'http://bff.test', fetch: oneVersion().fetch })
  const first = await client.profile('alice')
  first.data.user.name = 'edited by a view model'
  const second = await client.profile('alice')
  t.equal(second.status, 304)
  t.same(second.data, BODY, 'the 304 answers the version sent, not the caller\'s edit')
  t.not(second.data, first.data)
  second.data.user.name = 'edited again'
  const third = await client.profile('alice')
  t.same(third.data, BODY)
  t.not(third.data, second.data, 'two 304s, two objects')
})
