import t from 'tap'
import { profileOf } from '../../dev/profiles.ts'
import { loadBudget } from '../../src/load-budget.ts'
import { cacheStack, eventually, gate, stack } from '../helper.ts'

const batchUrl = (usernames: readonly string[], extra = ''): string =>
  `/profiles?${usernames.map((username) => `username=${encodeURIComponent(username)}`).join('&')}${extra}`
const names = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => `${prefix}-${i}`)

t.test('50 warm usernames in one request: every profile from its entry, no upstream call', async (t) => {
  const { app, sim } = await cacheStack(t)
  const members = names('warm', 50)
  for (const username of members) await app.inject(`/profile/${username}`)
  const res = await app.inject(batchUrl(members))
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-cache'], 'HIT')
  t.equal(res.headers['server-timing'], 'cache;desc=HIT')
  t.same(res.json(), { profiles: Object.fromEntries(members.map((username) => [username, { user: profileOf(username) }])), errors: {} })
  t.equal(sim.stats.dataCalls, 50, 'only the 50 warming calls')
})

t.test('cold usernames load in parallel, one upstream call each, even with single lookups of them on two instances', async (t) => {
  // Held at the upstream until all 20 are there, rather than for a latency a busy machine may outlast.
  const upstream = await gate(t)
  // Time enough for a starved machine to bring all 20 loads to the upstream before any caller's deadline drops one unsent.
  const { app, sim, config, another } = await cacheStack(t, { gate: upstream, env: { UPSTREAM_TIMEOUT_MS: '30000' } })
  const second = await another()
  await app.inject('/profile/token-warmer') // the token exchange is not what is measured
  upstream.hold()
  const members = names('cold', 20)
  const answered = Promise.all([
    app.inject(batchUrl(members)),
    second.inject(batchUrl(members)),
    ...members.map(async (username, i) => await (i % 2 === 0 ? app : second).inject(`/profile/${username}`))
  ])
  await eventually(() => upstream.held() === 20, 'all 20 loads under way at once: about one upstream latency, not 20', loadBudget(config).callerLoadMs)
  upstream.release()
  const [batch, otherBatch, ...singles] = await answered
  for (const username of members) t.equal(sim.callsFor('profile', username), 1, username)
  for (const res of [batch, otherBatch]) {
    t.equal(res?.statusCode, 200)
    t.same(Object.keys(res?.json().profiles).sort(), [...members].sort())
  }
  t.same(new Set(singles.map((res) => res.statusCode)), new Set([200]))
  t.equal(batch?.headers['x-cache'], 'MISS')
  t.match(batch?.headers['server-timing'], /^cache;desc=MISS, upstream;dur=\d+(\.\d)?$/)
})

t.test('a batch larger than the upstream concurrency and its queue loads every member, never UPSTREAM_OVERLOADED', async (t) => {
  // 2 at once and 16 waiting: 50 lookups started together would overflow the queue. A minute each: a starved machine
  // (a load average of 15 seen) takes seconds for the 25 turns, which the callers' deadline is not what this is about.
  const { app, sim } = await stack(t, { env: { UPSTREAM_MAX_CONCURRENCY: '2', RATE_LIMIT_PER_MINUTE: '0', UPSTREAM_TIMEOUT_MS: '60000' }, sim: { latencyMs: 5 } })
  const members = names('many', 50)
  const res = await app.inject(batchUrl(members))
  t.same(res.json().errors, {})
  t.equal(Object.keys(res.json().profiles).length, 50)
  t.equal(sim.stats.dataCalls, 50)
})

t.test('mixed results: every username under exactly one of profiles or errors', async (t) => {
  const { app, sim, clock } = await cacheStack(t)
  await app.inject('/profile/stale-one')
  clock.advance(301_000)
  sim.failAlways({ kind: 'status', status: 500 })
  const members = ['alice', 'ghost-7', 'a\u0001b', 'stale-one', 'x'.repeat(129)]
  const res = await app.inject(batchUrl(members.filter((name) => name !== 'alice')))
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.same(Object.keys(body.profiles), ['stale-one'], 'stale-if-error: the stale entry is served')
  t.same(body.profiles['stale-one'], { user: profileOf('stale-one') })
  t.same(body.errors['ghost-7'], { statusCode: 502, code: 'UPSTREAM_ERROR', error: 'Bad Gateway', message: 'The profile service failed: status 500' },
    'no stale entry: the upstream failure is that username\'s answer')
  const invalid = { statusCode: 400, code: 'INVALID_USERNAME', error: 'Bad Request', message: 'username must be 1 to 128 characters, not "." or "..", without control characters' }
  t.same(body.errors['a\u0001b'], invalid)
  t.same(body.errors['x'.repeat(129)], invalid)
  t.equal(res.headers['cache-control'], 'no-store', 'an answer holding an upstream failure is not kept')
  t.equal(res.headers['x-cache'], 'MISS', 'a member the cache could not serve: the batch is a miss, as its least fresh member')
  t.match(res.headers['server-timing'], /^cache;desc=MISS, upstream;dur=\d+\.\d$/)
  t.equal(res.headers.age, undefined, 'no Age on a MISS')

  sim.failAlways(undefined)
  const later = await app.inject(batchUrl(['alice', 'ghost-7', 'a\u0001b']))
  t.same(Object.keys(later.json().profiles), ['alice'])
  t.same(later.json().errors['ghost-7'], { statusCode: 404, code: 'PROFILE_NOT_FOUND', error: 'Not Found', message: 'No profile for username ghost-7' })
  t.same(Object.keys(later.json().errors).sort(), ['a\u0001b', 'ghost-7'])
  t.match(later.headers['cache-control'], /^public, max-age=\d+/, 'unknown and invalid usernames do not stop it being cached')
})

t.test('fields keeps only the keys asked for, case-insensitively, comma-separated or repeated', async (t) => {
  const { app } = await stack(t)
  const expected = { user: { name: profileOf('alice').name, Credits: profileOf('alice').Credits } }
  for (const extra of ['&fields=name,CREDITS', '&fields=credits&fields=Name', '&fields=name, credits']) {
    const res = await app.inject(batchUrl(['alice'], extra))
    t.equal(res.statusCode, 200, extra)
    t.same(res.json().profiles.alice, expected, extra)
  }
  const bad = await app.inject(batchUrl(['alice'], '&fields=name,email'))
  t.equal(bad.statusCode, 400)
  t.equal(bad.json().code, 'INVALID_FIELD')
  t.match(bad.json().message, /^fields must be one of: name, age/, 'names the parameter the caller got wrong')
  t.equal(bad.headers['cache-control'], 'no-store')
})

t.test('a username is valid in a batch exactly when it is on /profile: 128 code points, whatever they are', async (t) => {
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '0' } })
  // Outside the Basic Multilingual Plane a code point is two UTF-16 units: 128 of them are 256 units.
  for (const [name, valid] of [['😀'.repeat(128), true], ['😀'.repeat(129), false], ['é'.repeat(128), true], ['\u{10FFFF}'.repeat(128), true]] as const) {
    const single = await app.inject(`/profile/${encodeURIComponent(name)}`)
    const batch = (await app.inject(batchUrl([name]))).json()
    t.equal(single.statusCode, valid ? 200 : 400, `${name.slice(0, 2)} x ${[...name].length}: /profile`)
    t.same(Object.keys(batch.profiles ?? {}), valid ? [name] : [], `${name.slice(0, 2)} x ${[...name].length}: served in a batch as on /profile`)
    if (!valid) t.equal(batch.errors[name].code, 'INVALID_USERNAME')
  }
})

t.test('a malformed escape in the query answers 400 BAD_REQUEST, as in a path, and reaches no upstream', async (t) => {
  const { app, sim } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '0' } })
  for (const escape of ['%ZZ', '%ED%A0%80', '%E2%82', '%']) {
    const path = await app.inject(`/profile/${escape}`)
    const batch = await app.inject(`/profiles?username=alice&username=${escape}`)
    t.equal(path.statusCode, 400, `${escape}: /profile`)
    t.equal(batch.statusCode, 400, `${escape}: /profiles`)
    t.equal(batch.json().code, 'BAD_REQUEST')
    t.equal(batch.json().code, path.json().code, `${escape}: the same code`)
    t.equal(batch.headers['cache-control'], 'no-store')
  }
  t.equal(sim.stats.dataCalls, 0)
  const wellFormed = (await app.inject(`/profiles?username=${encodeURIComponent('a+b €')}&username=c+d`)).json()
  t.same(Object.keys(wellFormed.profiles).sort(), ['a+b €', 'c d'], 'a well-formed escape, and + as a space, still name usernames')
})

t.test('1 to 50 distinct usernames, duplicates counting once; otherwise 400 INVALID_BATCH', async (t) => {
  const { app, sim } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '0' } })
  const fifty = names('m', 50)
  const withDuplicates = await app.inject(batchUrl([...fifty, ...fifty.slice(0, 10)]))
  t.equal(withDuplicates.statusCode, 200)
  t.equal(Object.keys(withDuplicates.json().profiles).length, 50)
  const calls = sim.stats.dataCalls
  for (const url of ['/profiles', '/profiles?fields=name', batchUrl(names('n', 51))]) {
    const res = await app.inject(url)
    t.equal(res.statusCode, 400, url.slice(0, 40))
    t.equal(res.json().code, 'INVALID_BATCH')
    t.match(res.json().message, /^username must be given 1 to 50 times \(distinct values\), here (0|51)$/)
  }
  t.equal(sim.stats.dataCalls, calls, 'a refused batch looks nothing up')
})

t.test('the rate limit counts a batch once per username', async (t) => {
  const { app } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '10' } })
  const first = await app.inject(batchUrl(names('r', 6)))
  t.equal(first.statusCode, 200)
  t.equal(first.headers['x-ratelimit-remaining'], '4')
  const second = await app.inject(batchUrl(names('s', 6)))
  t.equal(second.statusCode, 429)
  t.equal(second.json().code, 'RATE_LIMITED')
  t.match(second.headers['retry-after'], /^\d+$/)
  const single = await app.inject('/profile/alice')
  t.equal(single.statusCode, 429, 'the budget is spent for single lookups too')
})

t.test('with the counts shared through Redis, a batch still counts once per username', async (t) => {
  const { app } = await cacheStack(t, { env: { RATE_LIMIT_PER_MINUTE: '10' } })
  t.equal((await app.inject(batchUrl(names('rr', 6)))).statusCode, 200)
  const second = await app.inject(batchUrl(names('ss', 6)))
  t.equal(second.statusCode, 429)
  t.equal(second.json().code, 'RATE_LIMITED')
})

t.test('a batch with an entry loaded for it answers MISS without Age, as a single MISS does; from the cache alone, the oldest age', async (t) => {
  const { app, clock } = await cacheStack(t)
  await app.inject('/profile/bob')
  clock.advance(88_000)
  const partly = await app.inject(batchUrl(['bob', 'cold-1']))
  t.equal(partly.statusCode, 200)
  t.equal(partly.headers['x-cache'], 'MISS')
  t.equal(partly.headers.age, undefined, 'no Age on a MISS')
  const cached = await app.inject(batchUrl(['bob', 'cold-1']))
  t.equal(cached.headers['x-cache'], 'HIT')
  t.equal(cached.headers.age, '88')
})

t.test('a batch with a member whose load failed answers MISS without Age, with the time it waited, though the others were hits', async (t) => {
  const { app, sim } = await cacheStack(t, { sim: { latencyMs: 50 } })
  await app.inject('/profile/bob')
  sim.failAlways({ kind: 'status', status: 500 })
  const res = await app.inject(batchUrl(['bob', 'fails-1']))
  t.same(Object.keys(res.json().profiles), ['bob'])
  t.equal(res.json().errors['fails-1'].code, 'UPSTREAM_ERROR')
  t.equal(res.headers['x-cache'], 'MISS')
  t.equal(res.headers.age, undefined)
  const [, dur] = /^cache;desc=MISS, upstream;dur=(\d+\.\d)$/.exec(String(res.headers['server-timing'])) ?? []
  t.ok(Number(dur) >= 50, `the upstream's share (${dur} ms) includes its latency`)
})

t.test('ETag and 304; Cache-Control takes the least fresh entry', async (t) => {
  const { app, clock } = await cacheStack(t)
  await app.inject('/profile/old-one')
  clock.advance(100_000)
  await app.inject('/profile/new-one')
  const res = await app.inject(batchUrl(['old-one', 'new-one']))
  const singles = await Promise.all(['old-one', 'new-one'].map(async (name) => await app.inject(`/profile/${name}`)))
  const maxAges = singles.map((one) => Number(/max-age=(\d+)/.exec(String(one.headers['cache-control']))?.[1]))
  t.equal(Number(/max-age=(\d+)/.exec(String(res.headers['cache-control']))?.[1]), Math.min(...maxAges))
  t.equal(res.headers.age, '100', 'the oldest entry\'s age')
  const etag = String(res.headers.etag)
  t.match(etag, /^"[\w-]+"$/)
  const again = await app.inject({ url: batchUrl(['old-one', 'new-one']), headers: { 'if-none-match': etag } })
  t.equal(again.statusCode, 304)
  t.equal(again.body, '')
  const otherFields = await app.inject({ url: batchUrl(['old-one', 'new-one'], '&fields=name'), headers: { 'if-none-match': etag } })
  t.equal(otherFields.statusCode, 200, 'another body, another tag')
  t.not(otherFields.headers.etag, etag)
})
