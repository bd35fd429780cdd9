import t from 'tap'
import type { Fault } from '../../../dev/simulator.ts'
import { cacheStack, eventually, rawRedis } from '../../helper.ts'

const faults: Array<[string, Fault]> = [
  ['a 5xx', { kind: 'status', status: 500 }],
  ['a 429', { kind: 'status', status: 429, retryAfter: '30' }],
  ['an invalid body', { kind: 'invalid-json' }],
  ['a body of the wrong shape', { kind: 'wrong-shape' }],
  ['a timeout', { kind: 'hang' }],
  ['a reset connection', { kind: 'reset' }]
]

for (const [name, fault] of faults) {
  // Only a hang waits for the deadline. A short one must still hold a cold app's first request (token exchange and
  // call) where that request has to succeed: at 300 ms a busy machine once turned a reset's 502 into a 504.
  const hang = fault.kind === 'hang'
  t.test(`${name} with a stale entry present: 200 STALE with the old body, the entry untouched`, async (t) => {
    const { app, sim, clock, config } = await cacheStack(t, { env: { UPSTREAM_TIMEOUT_MS: hang ? '1000' : '5000' } })
    const redis = rawRedis(t)
    const key = `${config.CACHE_KEY_PREFIX}v1:{alice}:profile`
    const first = await app.inject('/profile/alice')
    const stored = await redis.hgetall(key)
    clock.advance(301_000)
    sim.failAlways(fault)

    const stale = await app.inject('/profile/alice')
    t.equal(stale.statusCode, 200)
    t.equal(stale.headers['x-cache'], 'STALE')
    t.equal(stale.body, first.body)
    t.equal(stale.headers.etag, first.headers.etag)
    await eventually(() => sim.callsFor('profile', 'alice') >= 2, 'revalidation attempted')

    clock.advance(60_000)
    const again = await app.inject('/profile/alice')
    t.equal(again.statusCode, 200)
    t.equal(again.headers['x-cache'], 'STALE')
    t.equal(again.body, first.body)
    t.same(await redis.hgetall(key), stored, 'a failure never overwrites nor shortens the entry')
  })

  t.test(`${name} with nothing cached: the contract's error, and nothing stored`, async (t) => {
    const { app, sim, config } = await cacheStack(t, { env: { UPSTREAM_TIMEOUT_MS: hang ? '300' : '5000' } })
    const redis = rawRedis(t)
    sim.failAlways(fault)
    const res = await app.inject('/profile/bob')
    const expected = hang
      ? [504, 'UPSTREAM_TIMEOUT']
      : fault.kind === 'status' && fault.status === 429
        ? [503, 'UPSTREAM_RATE_LIMITED']
        : fault.kind === 'invalid-json' || fault.kind === 'wrong-shape' ? [502, 'UPSTREAM_INVALID_RESPONSE'] : [502, 'UPSTREAM_ERROR']
    t.equal(res.statusCode, expected[0])
    t.match(res.json(), { statusCode: expected[0], code: expected[1], error: String, message: String })
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal(await redis.exists(`${config.CACHE_KEY_PREFIX}v1:{bob}:profile`), 0)
  })
}

t.test('past the stale window, an upstream failure is the caller\'s error', async (t) => {
  const { app, sim, clock } = await cacheStack(t)
  await app.inject('/profile/alice')
  clock.advance((300 + 86_400 + 1) * 1000)
  sim.failAlways({ kind: 'status', status: 503 })
  const res = await app.inject('/profile/alice')
  t.equal(res.statusCode, 502)
  t.equal(res.json().code, 'UPSTREAM_ERROR')
})

t.test('a stale negative entry is served while the upstream fails', async (t) => {
  const { app, sim, clock } = await cacheStack(t)
  await app.inject('/profile/ghost-3')
  clock.advance(61_000)
  sim.failAlways({ kind: 'status', status: 500 })
  const res = await app.inject('/profile/ghost-3')
  t.equal(res.statusCode, 404)
  t.equal(res.headers['x-cache'], 'STALE')
  t.equal(res.json().code, 'PROFILE_NOT_FOUND')
})
