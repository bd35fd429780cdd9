import t from 'tap'
import { BREAKER_FAILURE_THRESHOLD } from '../../../src/upstream/circuit-breaker.ts'
import { Clock, stack } from '../../helper.ts'

// The breaker's timing, on the app's clock: a cold request every 100 ms through an outage and after it.

const STEP_MS = 100

t.test('during an outage the upstream sees about one call a second; after it, cold requests succeed within 2 s', async (t) => {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now, env: { RATE_LIMIT_PER_MINUTE: '0' } })
  await app.tokens.getToken()
  sim.failAlways({ kind: 'status', status: 500 })

  const outageMs = 10_000
  let n = 0
  for (let elapsed = 0; elapsed < outageMs; elapsed += STEP_MS) {
    const res = await app.inject(`/profile/cold-${n++}`)
    t.equal(res.statusCode, 502)
    clock.advance(STEP_MS)
  }
  const calls = sim.stats.dataCalls
  t.ok(calls <= BREAKER_FAILURE_THRESHOLD + outageMs / 1_000, `${calls} calls in ${outageMs / 1_000} s of outage, after the ${BREAKER_FAILURE_THRESHOLD} that opened the circuit`)
  t.ok(calls > BREAKER_FAILURE_THRESHOLD + outageMs / 1_000 / 2, 'and it keeps probing')

  sim.failAlways(undefined)
  let recoveredAfter = 0
  while ((await app.inject(`/profile/cold-${n++}`)).statusCode !== 200) {
    clock.advance(STEP_MS)
    recoveredAfter += STEP_MS
    if (recoveredAfter > 30_000) break
  }
  t.ok(recoveredAfter <= 2_000, `a cold request succeeded ${recoveredAfter} ms after the upstream recovered`)
  t.equal(app.upstream.breakerState, 'closed')
})

t.test('an upstream that alternates between failing and healthy every second still serves cold requests in each healthy second', async (t) => {
  const clock = new Clock(Date.now())
  const { app, sim } = await stack(t, { now: clock.now, env: { RATE_LIMIT_PER_MINUTE: '0' } })
  await app.tokens.getToken()
  let n = 0
  const servedPerHealthySecond: number[] = []
  for (let second = 0; second < 10; second++) {
    const healthy = second % 2 === 1
    sim.failAlways(healthy ? undefined : { kind: 'status', status: 500 })
    let served = 0
    for (let step = 0; step < 1_000 / STEP_MS; step++) {
      if ((await app.inject(`/profile/cold-${n++}`)).statusCode === 200) served++
      clock.advance(STEP_MS)
    }
    if (healthy) servedPerHealthySecond.push(served)
  }
  t.ok(servedPerHealthySecond.every((served) => served > 0), `cold requests served in every healthy second: ${servedPerHealthySecond.join(', ')}`)
})
