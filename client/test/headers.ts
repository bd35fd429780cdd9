import t from 'tap'
import { createClient } from '../src/index.ts'
import { failure, fakeFetch } from './helpers.ts'

const CACHE_CONTROL = 'public, max-age=48, stale-while-revalidate=48, stale-if-error=300'
const rateLimitHeaders = (remaining: number) => ({ 'x-ratelimit-limit': '120', 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': '37' })

t.test('an answer reads Age, Cache-Control and X-RateLimit-*; undefined when absent', async (t) => {
  const { fetch } = fakeFetch(({ url }) => url.endsWith('/profile/alice')
    ? Response.json({ user: {} }, { headers: { age: '12', 'cache-control': CACHE_CONTROL, ...rateLimitHeaders(119) } })
    : Response.json({ user: {} }))
  const client = createClient({ baseUrl: 'http://bff.test', fetch })
  const answer = await client.profile('alice')
  t.equal(answer.age, 12)
  t.equal(answer.cacheControl, CACHE_CONTROL)
  t.same(answer.rateLimit, { limit: 120, remaining: 119, reset: 37 })
  const bare = await client.profile('bob')
  t.same([bare.age, bare.cacheControl, bare.rateLimit], [undefined, undefined, undefined])
})

t.test('a RATE_LIMITED error carries the rate limit too', async (t) => {
  const { fetch } = fakeFetch(() => Response.json({ statusCode: 429, code: 'RATE_LIMITED', error: 'Too Many Requests', message: 'slow down' },
    { status: 429, headers: { 'retry-after': '37', ...rateLimitHeaders(0) } }))
  const error = await failure(createClient({ baseUrl: 'http://bff.test', fetch }).profile('alice'))
  t.equal(error.retryAfterSeconds, 37)
  t.same(error.rateLimit, { limit: 120, remaining: 0, reset: 37 })
})

t.test('a batch sent in parts: the oldest Age, the least fresh part\'s Cache-Control, the latest rate limit', async (t) => {
  let answered = 0
  const { fetch } = fakeFetch(({ url }) => {
    const usernames = new URL(url).searchParams.getAll('username')
    const first = ++answered === 1
    return Response.json({ profiles: Object.fromEntries(usernames.map((username) => [username, { user: {} }])), errors: {} }, {
      headers: { 'x-cache': first ? 'HIT' : 'STALE', age: first ? '5' : '90', 'cache-control': first ? CACHE_CONTROL : 'public, max-age=0', ...rateLimitHeaders(first ? 70 : 10) }
    })
  })
  const answer = await createClient({ baseUrl: 'http://bff.test', fetch }).profiles(Array.from({ length: 60 }, (_, i) => `user${i}`))
  t.equal(answer.cache, 'STALE')
  t.equal(answer.age, 90)
  t.equal(answer.cacheControl, 'public, max-age=0')
  t.same(answer.rateLimit, { limit: 120, remaining: 10, reset: 37 })
})
