import t from 'tap'
import { BREAKER_FAILURE_THRESHOLD, BREAKER_OPEN_MS, CircuitBreaker } from '../../../src/upstream/circuit-breaker.ts'
import { Clock, recordingTelemetry } from '../../helper.ts'

function breaker () {
  const clock = new Clock()
  const telemetry = recordingTelemetry()
  return { breaker: new CircuitBreaker({ telemetry, now: clock.now }), clock, telemetry }
}

function fail (breaker: CircuitBreaker, times: number): void {
  for (let i = 0; i < times; i++) {
    const permit = breaker.tryAcquire()
    if (permit !== undefined) breaker.record(permit, true)
  }
}

t.test('failures in a row open the circuit; a success in between resets the count', async (t) => {
  const { breaker: b, telemetry } = breaker()
  fail(b, BREAKER_FAILURE_THRESHOLD - 1)
  b.record('call', false)
  fail(b, BREAKER_FAILURE_THRESHOLD - 1)
  t.equal(b.state, 'closed')
  fail(b, 1)
  t.equal(b.state, 'open')
  t.notOk(b.tryAcquire(), 'calls are refused while open')
  t.same(telemetry.events, ['breaker:open'])
})

t.test('after the open period exactly one probe goes through; its success closes the circuit', async (t) => {
  const { breaker: b, clock, telemetry } = breaker()
  fail(b, BREAKER_FAILURE_THRESHOLD)
  clock.advance(BREAKER_OPEN_MS - 1)
  t.equal(b.retryInMs, 1)
  t.notOk(b.tryAcquire())
  clock.advance(1)
  t.equal(b.state, 'half_open')
  t.equal(b.tryAcquire(), 'probe')
  t.notOk(b.tryAcquire(), 'nobody else while the probe runs')
  b.record('probe', false)
  t.equal(b.state, 'closed')
  t.ok(b.tryAcquire())
  t.same(telemetry.events, ['breaker:open', 'breaker:half_open', 'breaker:closed'])
})

t.test('a failed probe opens the circuit again for a whole period', async (t) => {
  const { breaker: b, clock } = breaker()
  fail(b, BREAKER_FAILURE_THRESHOLD)
  clock.advance(BREAKER_OPEN_MS)
  t.equal(b.tryAcquire(), 'probe')
  b.record('probe', true)
  t.equal(b.state, 'open')
  t.equal(b.retryInMs, BREAKER_OPEN_MS)
  clock.advance(BREAKER_OPEN_MS)
  t.ok(b.tryAcquire())
})

t.test('a call that ends without a verdict (cancelled) gives a probe\'s turn back and changes no count', async (t) => {
  const { breaker: b, clock, telemetry } = breaker()
  fail(b, BREAKER_FAILURE_THRESHOLD - 1)
  t.equal(b.tryAcquire(), 'call')
  b.abstain('call')
  fail(b, 1)
  t.equal(b.state, 'open', 'the failures before it still count')
  clock.advance(BREAKER_OPEN_MS)
  t.equal(b.tryAcquire(), 'probe')
  b.abstain('probe')
  t.equal(b.state, 'half_open')
  t.ok(b.tryAcquire(), 'the next call probes in its place')
  t.same(telemetry.events, ['breaker:open', 'breaker:half_open'])
})

t.test('a call let through before the circuit opened, ending while the probe runs, lets no second probe in', async (t) => {
  const { breaker: b, clock } = breaker()
  const early = b.tryAcquire()
  t.equal(early, 'call')
  fail(b, BREAKER_FAILURE_THRESHOLD)
  clock.advance(BREAKER_OPEN_MS)
  t.equal(b.tryAcquire(), 'probe')
  b.abstain('call')
  t.notOk(b.tryAcquire(), 'a cancelled early call: still one probe')
  b.record('call', true)
  t.notOk(b.tryAcquire(), 'a failed early call reopens the circuit, the probe still out')
  b.record('probe', false)
  t.equal(b.state, 'closed', 'the probe\'s success closes it')
})
