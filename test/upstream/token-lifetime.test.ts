import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { stack, tally } from '../helper.js'

// The one test that runs in real time: the simulator's tokens really expire.
t.test('with a 3-second token lifetime and steady traffic over 10 s, no expired token and no error', async (t) => {
  const { app, sim } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '0' }, sim: { tokenTtlSeconds: 3, tokenLatencyMs: 100 } })
  const responses = []
  const end = Date.now() + 10_000
  for (let i = 0; Date.now() < end; i++) {
    // Two new members every 50 ms: every request reaches the upstream.
    responses.push(...await Promise.all([app.inject(`/profile/steady-${i}-a`), app.inject(`/profile/steady-${i}-b`)]))
    await sleep(50)
  }
  t.same(tally(responses), { 200: responses.length }, `${responses.length} requests, all served`)
  t.equal(sim.stats.expiredTokensSeen, 0)
  t.equal(sim.stats.rejectedTokens, 0)
  // Renewed at 80% of its life (2.4 s): at least 4 tokens in 10 s, and never more than one per 2.4 s.
  t.ok(sim.stats.tokensIssued >= 4 && sim.stats.tokensIssued <= 5, `${sim.stats.tokensIssued} tokens`)
})
