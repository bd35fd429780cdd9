import t, { type Test } from 'tap'
import { performance } from 'node:perf_hooks'
import { createEntry } from '../../../src/cache/cache-entry.ts'
import { CacheStack, type Load } from '../../../src/cache/cache-stack.ts'
import { loadBudget } from '../../../src/load-budget.ts'
import { Clock } from '../../helper.ts'
import { instance, recordingBudgetTelemetry, settingsOf, Timers } from './harness.ts'

// A caller's time counts from its request's arrival, not from its lookup: what it queued for before (the rate limit,
// an event loop under load) is part of its deadline, and it is answered within it (issue 25 point 6).

const TIMEOUT_MS = 2_000
/** The caller arrived this long before its lookup. */
const QUEUED_MS = 1_500
/** Real timers may run late on a busy machine: from its lookup, it would wait 1.8 s, four times this bound. */
const LATE_TIMERS_MS = 400

/** A cache over one instance's gate at 1 call/s, its one call spent: a caller with nothing to serve waits for budget. */
async function spentBudget (t: Test) {
  const clock = new Clock()
  const timers = new Timers(clock)
  const telemetry = recordingBudgetTelemetry()
  const gate = instance({ clock, timers, settings: settingsOf(1, 1, 1), telemetry })
  const cache = new CacheStack({
    budget: loadBudget({ UPSTREAM_TIMEOUT_MS: TIMEOUT_MS }),
    now: clock.now,
    telemetry: { cacheResult: () => {}, coalescedWaiter: () => {} },
    onError: () => {}
  })
  // As the upstream client does: the call must be sent by the caller's deadline.
  const load: Load = async (signal, priority, deadlineAt) => {
    await gate.acquire(priority, signal, deadlineAt)
    return createEntry(200, '"loaded"', clock.now(), { freshMs: 60_000, staleMs: 60_000 })
  }
  t.equal((await cache.lookup('first', 'profile', load)).state, 'MISS', 'the one call of the bucket')
  t.teardown(() => { cache.close() })
  return { cache, load, timers, telemetry }
}

/** How long `lookup` took to settle, in real ms, and how. */
async function timed (lookup: Promise<unknown>): Promise<{ ms: number, error: unknown }> {
  const started = performance.now()
  // Deadlines' timers (AbortSignal.timeout) do not keep a process alive; in the app, its server does.
  const alive = setInterval(() => {}, 1_000)
  const error = await lookup.then(() => undefined, (reason: unknown) => reason).finally(() => { clearInterval(alive) })
  return { ms: performance.now() - started, error }
}

t.test('a caller that queued before its lookup is refused for want of budget within its deadline, counted from its arrival', async (t) => {
  const { cache, load } = await spentBudget(t)
  const { ms, error } = await timed(Promise.resolve(cache.lookup('cold', 'profile', load, undefined, { elapsedTime: QUEUED_MS })))
  t.match(error, { statusCode: 503, code: 'UPSTREAM_BUDGET_EXHAUSTED' }, 'the budget\'s refusal, not a timeout')
  // Its time left at the lookup is 2,000 - 1,500 ms, less the answer's margin (200 ms) and the load's lead (40 ms).
  t.ok(ms < TIMEOUT_MS - QUEUED_MS + LATE_TIMERS_MS, `answered ${ms.toFixed(0)} ms after its lookup, when its time was up`)
})

t.test('a caller whose load hangs gets 504 UPSTREAM_TIMEOUT within its deadline, counted from its arrival', async (t) => {
  const { cache } = await spentBudget(t)
  let aborted: unknown
  const hanging: Load = async (signal) => await new Promise((_resolve, reject) => {
    signal.addEventListener('abort', () => { aborted = signal.reason; reject(signal.reason) }, { once: true })
  })
  const { ms, error } = await timed(Promise.resolve(cache.lookup('hung', 'profile', hanging, undefined, { elapsedTime: QUEUED_MS })))
  t.match(error, { statusCode: 504, code: 'UPSTREAM_TIMEOUT' })
  t.ok(ms < TIMEOUT_MS - QUEUED_MS + LATE_TIMERS_MS, `answered ${ms.toFixed(0)} ms after its lookup, when its time was up`)
  t.match(aborted, { name: 'TimeoutError' }, 'the load was given up at the caller\'s deadline: the upstream call is not left running')
})

t.test('a caller that arrived past its deadline is answered at once, with the contract\'s 503 or 504', async (t) => {
  const { cache, load } = await spentBudget(t)
  const { ms, error } = await timed(Promise.resolve(cache.lookup('late', 'profile', load, undefined, { elapsedTime: TIMEOUT_MS })))
  t.match(error, { statusCode: /^(503|504)$/, code: /^(UPSTREAM_BUDGET_EXHAUSTED|UPSTREAM_TIMEOUT)$/ })
  t.ok(ms < LATE_TIMERS_MS, `in ${ms.toFixed(0)} ms`)
})

t.test('while the budget is short, a caller whose remaining time the queue cannot cover is refused at its lookup, not at its deadline', async (t) => {
  const { cache, load, timers, telemetry } = await spentBudget(t)
  const ahead = cache.lookup('ahead', 'profile', load)
  await timers.idle()
  // One caller queued ahead, at 1 call/s: a second to wait, and 260 ms of its time left.
  const { error } = await timed(Promise.resolve(cache.lookup('late', 'profile', load, undefined, { elapsedTime: QUEUED_MS })))
  t.match(error, { statusCode: 503, code: 'UPSTREAM_BUDGET_EXHAUSTED' })
  t.same(telemetry.events.filter((event) => event.endsWith(':caller') || event.endsWith(':deadline')),
    ['call:caller', 'deferred:caller', 'dropped:caller:deadline'], 'refused without queueing: only the caller ahead waited')
  await timers.advance(1_500)
  t.equal((await ahead).state, 'MISS', 'the caller ahead is served at the refill')
})
