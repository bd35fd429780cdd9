import t from 'tap'
import { Clock, stack, tally } from '../../helper.ts'

// The simulator's tokens expire by the app's clock: 10 s of steady traffic pass without waiting for them.
t.test('with a 3-second token lifetime and steady traffic over 10 s, no expired token and no error', async (t) => {
  const clock = new Clock()
  const { app, sim } = await stack(t, { env: { RATE_LIMIT_PER_MINUTE: '0' }, sim: { tokenTtlSeconds: 3, now: clock.now }, now: clock.now })
  const responses = []
  for (let i = 0; i < 200; i++) {
    // Two new members every 50 ms: every request reaches the upstream.
    responses.push(...await Promise.all([app.inject(`/profile/steady-${i}-a`), app.inject(`/profile/steady-${i}-b`)]))
    clock.advance(50)
  }
  t.same(tally(responses), { 200: 400 }, 'every request served')
  t.equal(sim.stats.expiredTokensSeen, 0)
  t.equal(sim.stats.rejectedTokens, 0)
  // Renewed at 80% of its life (2.4 s): at least 4 tokens in 10 s, and never more than one per 2.4 s.
  t.ok(sim.stats.tokensIssued >= 4 && sim.stats.tokensIssued <= 5, `${sim.stats.tokensIssued} tokens`)
})
