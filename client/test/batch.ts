import t from 'tap'
import { createClient } from '../src/index.ts'
import { fakeFetch } from './helpers.ts'

const REQUEST_LINE_LIMIT = 8000
const requestLine = (url: string): string => { const { pathname, search } = new URL(url); return `GET ${pathname}${search} HTTP/1.1` }
const usernamesOf = (url: string): string[] => new URL(url).searchParams.getAll('username')
const error = (statusCode: number, code: string) => Response.json({ statusCode, code, error: code, message: code }, { status: statusCode })

/** The service's batch, as far as this client sees it: its limits, `ghost-` members unknown, `cold-` ones a MISS, an ETag per URL. */
const service = () => {
  let answered = 0
  return fakeFetch(({ url, init }) => {
    const usernames = new Set(usernamesOf(url))
    if (requestLine(url).length > REQUEST_LINE_LIMIT) return error(414, 'URI_TOO_LONG')
    if (usernames.size === 0 || usernames.size > 50) return error(400, 'INVALID_BATCH')
    const etag = `"${encodeURIComponent(url).length}"`
    const headers = { etag, 'x-cache': [...usernames].some((username) => username.startsWith('cold-')) ? 'MISS' : 'HIT', 'x-request-id': `r${++answered}` }
    if (new Headers(init?.headers).get('if-none-match') === etag) return new Response(null, { status: 304, headers })
    const known = [...usernames].filter((username) => !username.startsWith('ghost-'))
    return Response.json({
      profiles: Object.fromEntries(known.map((username) => [username, { user: { name: username } }])),
      errors: Object.fromEntries([...usernames].filter((username) => username.startsWith('ghost-'))
        .map((username) => [username, { statusCode: 404, code: 'PROFILE_NOT_FOUND', error: 'Not Found', message: username }]))
    }, { headers })
  })
}

t.test('120 usernames: three batches of at most 50 in parallel, merged into one answer', async (t) => {
  const { fetch, requests } = service()
  const client = createClient({ baseUrl: 'http://bff.test', fetch })
  const usernames = Array.from({ length: 120 }, (_, i) => i === 7 ? 'ghost-7' : i === 70 ? 'cold-70' : `user${i}`)
  const answer = await client.profiles([...usernames, ...usernames.slice(0, 10)])
  t.equal(requests.length, 3)
  t.ok(requests.every(({ url }) => usernamesOf(url).length <= 50), 'at most 50 usernames a request')
  t.same(requests.flatMap(({ url }) => usernamesOf(url)), usernames, 'each username sent once, in order')
  t.same(Object.keys(answer.data.profiles), usernames.filter((username) => username !== 'ghost-7'))
  t.same(Object.keys(answer.data.errors), ['ghost-7'])
  t.equal(answer.status, 200)
  t.equal(answer.etag, undefined, 'no one ETag stands for three versions')
  t.equal(answer.cache, 'MISS', 'the least fresh of the batches')
  t.equal(answer.requestId, 'r1, r2, r3')
  const again = await client.profiles(usernames)
  t.equal(again.status, 304, 'every batch revalidated')
  t.same(again.data, answer.data)
})

t.test('long usernames: as many batches as keep each request line under the service\'s limit', async (t) => {
  const { fetch, requests } = service()
  const client = createClient({ baseUrl: 'http://bff.test/api', fetch })
  const usernames = Array.from({ length: 50 }, (_, i) => `${'🦊'.repeat(125)}${i}`)
  const answer = await client.profiles(usernames, { fields: ['name', 'credits'] })
  t.ok(requests.length > 1, `${requests.length} batches`)
  for (const { url } of requests) {
    t.ok(requestLine(url).length <= REQUEST_LINE_LIMIT, `a request line of ${requestLine(url).length} octets`)
    t.equal(new URL(url).searchParams.get('fields'), 'name,credits')
  }
  t.equal(Object.keys(answer.data.profiles).length, 50)
})

t.test('one batch answers as it always did', async (t) => {
  const { fetch, requests } = service()
  const client = createClient({ baseUrl: 'http://bff.test', fetch })
  const answer = await client.profiles(['alice', 'bob'], { fields: ['name', 'credits'] })
  t.same(requests.map(({ url }) => url), ['http://bff.test/profiles?username=alice&username=bob&fields=name%2Ccredits'])
  t.match(answer.etag, /^"\d+"$/)
  t.equal(answer.cache, 'HIT')
  t.equal(answer.requestId, 'r1')
})
