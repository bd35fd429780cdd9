import { mock } from 'node:test'
import t from 'tap'
import { isCancellation, isDeadline, nobodyWaits, untilAborted, withDeadline } from '../../../src/cancellation.ts'
import { settle } from '../../helper.ts'

// withDeadline: a signal bounded by a deadline that lets go of its timer and of the outer signal once its work is
// done, instead of living (with every closure its listeners hold) until the timer would have fired.

t.test('it aborts with a TimeoutError when its time is up, not before', async (t) => {
  // Node's mock timers, for this test only: its clock moves without waiting.
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => { mock.timers.reset() })
  const deadline = withDeadline(undefined, 5_000)
  mock.timers.tick(4_999)
  t.notOk(deadline.signal.aborted)
  mock.timers.tick(1)
  t.ok(isDeadline(deadline.signal.reason))
})

t.test('it aborts with the outer signal\'s reason when the outer signal aborts, at once or already', async (t) => {
  const outer = new AbortController()
  const deadline = withDeadline(outer.signal, 60_000)
  outer.abort(nobodyWaits('every caller left'))
  t.ok(deadline.signal.aborted, 'in the same tick')
  t.ok(isCancellation(deadline.signal.reason))
  t.ok(withDeadline(outer.signal, 60_000).signal.aborted, 'an outer signal aborted already aborts it at once')
})

t.test('cleared, its timer is gone and it no longer follows the outer signal', async (t) => {
  // Node's mock timers, for this test only: its clock moves without waiting.
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => { mock.timers.reset() })
  const outer = new AbortController()
  const kept = withDeadline(outer.signal, 60_000)
  const cleared = withDeadline(outer.signal, 60_000)
  cleared.clear()
  mock.timers.tick(60_000)
  t.ok(kept.signal.aborted && isDeadline(kept.signal.reason), 'the one still at work times out')
  t.notOk(cleared.signal.aborted, 'the cleared one\'s timer is gone')
  outer.abort(nobodyWaits('late'))
  t.notOk(cleared.signal.aborted, 'and the outer signal\'s end does not reach it')
})

t.test('untilAborted: a promise given up on before it settles never becomes an unhandled rejection, aborted already or later', async (t) => {
  const unhandled: unknown[] = []
  const record = (reason: unknown): void => { unhandled.push(reason) }
  process.on('unhandledRejection', record)
  t.teardown(() => { process.off('unhandledRejection', record) })
  for (const when of ['already', 'later'] as const) {
    const controller = new AbortController()
    if (when === 'already') controller.abort(new Error('given up'))
    const work = Promise.withResolvers<string>()
    const waiting = untilAborted(work.promise, controller.signal)
    if (when === 'later') controller.abort(new Error('given up'))
    await t.rejects(waiting, { message: 'given up' }, `aborted ${when}: the waiter is told at once`)
    work.reject(new Error('the work failed after'))
    await settle()
  }
  t.same(unhandled, [], 'nothing unhandled')
})
