import t from 'tap'
import { retryAfterOf } from '../../../src/errors.ts'
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
  calls.ask(gate, 'awaited-revalidation')
  calls.ask(gate, 'caller')
  await timers.advance(1_300)
  t.same(calls.granted.map((grant) => grant.tag), ['first', 'caller', 'awaited-revalidation'], 'two calls a second, highest class first')
  t.same(calls.refused.map((refusal) => refusal.tag), ['refresh-ahead'], 'refresh-ahead found no spare budget within its wait: dropped')
  await timers.advance(700)
  t.same(calls.granted.map((grant) => grant.tag).slice(3), ['background'], 'then the background revalidation, within its wait')
  t.same(telemetry.events.filter((event) => !event.startsWith('rate:')), ['call:caller',
    'deferred:caller', 'deferred:awaited-revalidation', 'deferred:background', 'deferred:refresh-ahead',
    'dropped:refresh-ahead:waited_too_long', 'call:caller', 'call:awaited-revalidation', 'call:background'])
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

t.test('a caller still waiting at its deadline gets UPSTREAM_BUDGET_EXHAUSTED with Retry-After; a cancelled one its reason', async (t) => {
  const { timers, telemetry, gate, calls } = scarce()
  calls.ask(gate, 'caller')
  await timers.idle()
  const late = new AbortController()
  const gone = new AbortController()
  const lateBackground = new AbortController()
  calls.ask(gate, 'caller', 1, late.signal, 'late')
  calls.ask(gate, 'awaited-revalidation', 1, late.signal, 'late-revalidation')
  calls.ask(gate, 'caller', 1, gone.signal, 'gone')
  calls.ask(gate, 'background', 1, lateBackground.signal, 'late-background')
  await timers.advance(300)
  late.abort(new DOMException('deadline', 'TimeoutError'))
  gone.abort(new DOMException('closed', 'AbortError'))
  lateBackground.abort(new DOMException('deadline', 'TimeoutError'))
  await timers.idle()
  const refusal = (tag: string) => calls.refused.find((refused) => refused.tag === tag)?.error
  for (const tag of ['late', 'late-revalidation']) {
    t.match(refusal(tag), { code: 'UPSTREAM_BUDGET_EXHAUSTED', statusCode: 503 }, tag)
    t.ok((retryAfterOf(refusal(tag)) ?? 0) >= 1, `${tag}: Retry-After ${retryAfterOf(refusal(tag))} s`)
  }
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
    config: { UPSTREAM_MAX_RPS: 0, UPSTREAM_BURST: undefined, UPSTREAM_EXPECTED_INSTANCES: 1, CACHE_KEY_PREFIX: 'unused:' },
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
