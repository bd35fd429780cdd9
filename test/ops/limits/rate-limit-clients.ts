import t from 'tap'
import { LocalRateCounts } from '../../../src/rate-limit/rate-counts.ts'
import { stack } from '../../helper.ts'

// The in-process count (no Redis) must not forget a client while thousands of others are counted.

t.test('with more than 5,000 distinct clients in the window, the first one is still refused past its budget', async (t) => {
  const { app, sim } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '1', TRUST_PROXY: 'true' } })
  // A query the service refuses itself (400) is counted, and costs the upstream nothing.
  const ask = async (client: string) =>
    await app.inject({ url: '/user/alice?query=nothing', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': client } })

  t.equal((await ask('198.51.100.7')).statusCode, 400, 'the first client spends its budget')
  const others = 5_200 // past the 5,000 that @fastify/rate-limit's store kept by default
  let refused = 0
  for (let batch = 0; batch < others; batch += 400) {
    const answers = await Promise.all(Array.from({ length: Math.min(400, others - batch) }, async (_, i) => {
      const n = batch + i
      return await ask(`10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`)
    }))
    refused += answers.filter((res) => res.statusCode === 429).length
  }
  t.equal(refused, 0, `${others} other clients each had a budget of their own`)
  const again = await ask('198.51.100.7')
  t.equal(again.statusCode, 429, 'the first client is still counted')
  t.equal(sim.stats.dataCalls, 0)
})

t.test('past its bound of clients the count forgets the least recently seen first, one client a slot', async (t) => {
  const counts = new LocalRateCounts({ windowMs: 60_000, maxClients: 3, now: () => 0 })
  const count = (client: string): number => counts.add(client, 1).current
  for (const client of ['a', 'b', 'c']) count(client)
  t.equal(count('a'), 2, 'a is seen again: b is now the least recently seen')
  count('d')
  t.equal(count('b'), 1, 'b was forgotten for d, and starts again')
  t.equal(count('a'), 3, 'a was kept')
})
