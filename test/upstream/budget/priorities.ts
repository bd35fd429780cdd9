import t from 'tap'
import { retryAfterOf } from '../../../src/errors.ts'
import type { Priority } from '../../../src/resources.ts'
import { isBudgetDropped } from '../../../src/upstream/budget/priorities.ts'
import { createUpstreamBudget } from '../../../src/upstream/budget/upstream-budget.ts'
import { Clock } from '../../helper.ts'
import { instance, Outcomes, recordingBudgetTelemetry, settingsOf, Timers } from './harness.ts'

/** One instance alone, 1 call/s, a bucket of one call: every call after the first waits for the next second. */
function scarce (rps = 1, burst = 1) {
  const clock = new Clock()
  const timers = new Timers(clock)
  const telemetry = recordingBudgetTelemetry()
  const gate = instance({ clock, timers, settings: settingsOf(rps, 1, burst), telemetry })
  return { clock, timers, telemetry, gate, calls: new Outcomes(clock) }
}

t.test('a caller is served before the background work that was waiting before it', async (t) => {
  const { timers, telemetry, gate, calls } = scarce(2)
  calls.ask(gate, 'caller', 1, undefined, 'first')
  await timers.idle()
  calls.ask(gate, 'refresh-ahead')
  calls.ask(gate, 'background')
  calls.ask(gate, 'caller')
  calls.ask(gate, 'caller', 1, undefined, 'next caller')
  await timers.advance(1_300)
  t.same(calls.granted.map((grant) => grant.tag), ['first', 'caller', 'next caller'], 'two calls a second, highest class first')
  t.same(calls.refused.map((refusal) => refusal.tag), ['refresh-ahead'], 'refresh-ahead found no spare budget within its wait: dropped')
  await timers.advance(700)
  t.same(calls.granted.map((grant) => grant.tag).slice(3), ['background'], 'then the background revalidation, within its wait')
  t.same(telemetry.events.filter((event) => !event.startsWith('rate:')), ['call:caller',
    'deferred:caller', 'deferred:caller', 'deferred:background', 'deferred:refresh-ahead',
    'dropped:refresh-ahead:waited_too_long', 'call:caller', 'call:caller', 'call:background'])
})

t.test('background work leaves the last quarter of the bucket to callers; refresh-ahead the last half', async (t) => {
  const { timers, gate, calls } = scarce(10, 8)
  calls.ask(gate, 'caller', 4)
  await timers.idle()
  calls.ask(gate, 'refresh-ahead')
  await timers.idle()
  t.equal(calls.grantedOf('refresh-ahead'), 0, 'half the bucket left: no spare budget')
  calls.ask(gate, 'background', 2)
  await timers.idle()
  t.equal(calls.grantedOf('background'), 2, 'background work takes what is above the quarter')
  calls.ask(gate, 'background')
  calls.ask(gate, 'caller', 2)
  await timers.idle()
  t.equal(calls.grantedOf('caller'), 6, 'callers take the last quarter at once, while background work waits')
  t.equal(calls.grantedOf('background'), 2)
})

t.test('background and refresh-ahead work is dropped when too much of it waits, or after its longest wait', async (t) => {
  const { timers, telemetry, gate, calls } = scarce()
  calls.ask(gate, 'caller', 3)
  calls.ask(gate, 'background', 33)
  calls.ask(gate, 'refresh-ahead', 9)
  await timers.idle()
  const dropped = (reason: string) => calls.refused.filter(({ error }) => isBudgetDropped(error) && error.reason === reason).map(({ priority }) => priority)
  t.same(dropped('queue_full'), ['background', 'refresh-ahead'], 'one past each queue\'s length, at once')
  await timers.advance(500)
  t.same(dropped('waited_too_long'), Array(8).fill('refresh-ahead'), 'refresh-ahead waits half a second at most')
  await timers.advance(1_500)
  t.equal(dropped('waited_too_long').filter((priority) => priority === 'background').length, 32, 'background work two seconds')
  await timers.advance(500)
  t.equal(calls.grantedOf('caller'), 3, 'the callers were all served, one a second')
  t.notOk(calls.refused.some(({ priority }) => priority === 'caller'), 'and never dropped')
  t.ok(telemetry.events.includes('dropped:background:queue_full'))
  t.equal(calls.refused.every(({ error }) => (error as Error).name === 'BudgetDropped' && retryAfterOf(error) === undefined), true,
    'a reason of its own, never a caller\'s error')
})

t.test('work nobody waits for waits a quarter of a caller\'s time at most, within its class\'s own bound: it may hold the lock callers elsewhere wait for', async (t) => {
  // UPSTREAM_TIMEOUT_MS -> how long background and refresh-ahead work wait at most, as the app builds the budget.
  for (const [timeoutMs, backgroundMs, refreshAheadMs] of [[1_000, 250, 250], [4_000, 1_000, 500], [12_000, 2_000, 500]] as const) {
    const clock = new Clock()
    const timers = new Timers(clock)
    const gate = createUpstreamBudget({
      config: { UPSTREAM_MAX_RPS: 1, UPSTREAM_BURST: 1, UPSTREAM_EXPECTED_INSTANCES: 1, UPSTREAM_TIMEOUT_MS: timeoutMs, CACHE_KEY_PREFIX: 'unused:' },
      now: clock.now,
      schedule: timers.schedule,
      onError: () => {}
    })
    const calls = new Outcomes(clock)
    const start = clock.now()
    // Callers enough to take every call the bucket gives for longer than any of these waits.
    calls.ask(gate, 'caller', 5)
    calls.ask(gate, 'background')
    calls.ask(gate, 'refresh-ahead')
    const dropped = (priority: Priority): boolean => calls.refused.some((refusal) => refusal.priority === priority && isBudgetDropped(refusal.error) && refusal.error.reason === 'waited_too_long')
    const waits = [['refresh-ahead', refreshAheadMs], ['background', backgroundMs]] as const
    // Just before and at each class's bound, every class is dropped exactly when its own bound has passed.
    for (const atMs of [...new Set(waits.flatMap(([, waitMs]) => [waitMs - 1, waitMs]))]) {
      await timers.advance(atMs - (clock.now() - start))
      for (const [priority, waitMs] of waits) {
        t.equal(dropped(priority), atMs >= waitMs, `UPSTREAM_TIMEOUT_MS=${timeoutMs}: ${priority} at ${atMs} ms ${atMs >= waitMs ? 'dropped' : 'still waits'}`)
      }
    }
    // A second apart, retries spread by half their delay either side.
    await timers.advance(8_000)
    t.equal(calls.grantedOf('caller'), 5, `UPSTREAM_TIMEOUT_MS=${timeoutMs}: the callers are served, never dropped`)
  }
})

t.test('a caller still waiting at its deadline gets UPSTREAM_BUDGET_EXHAUSTED with Retry-After; a cancelled one its reason', async (t) => {
  const { timers, telemetry, gate, calls } = scarce()
  calls.ask(gate, 'caller')
  await timers.idle()
  const late = new AbortController()
  const gone = new AbortController()
  const lateBackground = new AbortController()
  calls.ask(gate, 'caller', 1, late.signal, 'late')
  calls.ask(gate, 'caller', 1, gone.signal, 'gone')
  calls.ask(gate, 'background', 1, lateBackground.signal, 'late-background')
  await timers.advance(300)
  late.abort(new DOMException('deadline', 'TimeoutError'))
  gone.abort(new DOMException('closed', 'AbortError'))
  lateBackground.abort(new DOMException('deadline', 'TimeoutError'))
  await timers.idle()
  const refusal = (tag: string) => calls.refused.find((refused) => refused.tag === tag)?.error
  t.match(refusal('late'), { code: 'UPSTREAM_BUDGET_EXHAUSTED', statusCode: 503 })
  t.ok((retryAfterOf(refusal('late')) ?? 0) >= 1, `Retry-After ${retryAfterOf(refusal('late'))} s`)
  t.match(refusal('gone'), { name: 'AbortError' }, 'nobody waits: the signal\'s reason')
  t.match(refusal('late-background'), { name: 'TimeoutError' }, 'background work is no caller\'s: the signal\'s reason')
  t.ok(telemetry.events.includes('dropped:caller:deadline'))
  await timers.advance(1_000)
  t.equal(calls.granted.length, 1, 'nobody left waiting: the budget is not spent on them')
})

t.test('an already aborted signal is refused before it waits', async (t) => {
  const { gate } = scarce()
  const reason = new DOMException('closed', 'AbortError')
  await t.rejects(gate.acquire('caller', AbortSignal.abort(reason)), reason)
})

t.test('with UPSTREAM_MAX_RPS=0 the gate lets every call through and only counts them', async (t) => {
  const telemetry = recordingBudgetTelemetry()
  const budget = createUpstreamBudget({
    config: { UPSTREAM_MAX_RPS: 0, UPSTREAM_BURST: undefined, UPSTREAM_EXPECTED_INSTANCES: 1, UPSTREAM_TIMEOUT_MS: 5_000, CACHE_KEY_PREFIX: 'unused:' },
    now: Date.now,
    telemetry,
    onError: () => {}
  })
  await Promise.all(Array.from({ length: 100 }, async () => await budget.acquire('background', new AbortController().signal)))
  await budget.slowDown(5_000)
  t.equal(budget.rate(), undefined)
  t.equal(telemetry.events.length, 100)
  t.equal(telemetry.events[0], 'call:background')
  await t.rejects(budget.acquire('caller', AbortSignal.abort()), { name: 'AbortError' })
})
