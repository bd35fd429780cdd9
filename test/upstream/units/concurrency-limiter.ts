import t from 'tap'
import { ConcurrencyLimiter } from '../../../src/upstream/concurrency-limiter.ts'
import { settle } from '../../helper.ts'

const patient = (): AbortSignal => new AbortController().signal

/** A holder that enters the limiter (at once or from the queue) and records when it got its slot. */
function holder (limiter: ConcurrencyLimiter, signal = patient()): { entered: () => boolean, done: Promise<void> } {
  let entered = false
  const done = limiter.tryEnter() ? Promise.resolve() : limiter.enter(signal)
  const tracked = done.then(() => { entered = true })
  return { entered: () => entered, done: tracked }
}

t.test('at most `concurrency` hold a slot, the others wait in order as slots are given back', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 2 })
  const holders = Array.from({ length: 4 }, () => holder(limiter))
  await settle()
  t.same(holders.map((h) => h.entered()), [true, true, false, false])
  t.equal(limiter.running, 2)
  t.equal(limiter.queued, 2)
  limiter.leave()
  await settle()
  t.same(holders.map((h) => h.entered()), [true, true, true, false], 'the first in line takes the freed slot')
  for (let i = 0; i < 3; i++) limiter.leave()
  await Promise.all(holders.map(async (h) => await h.done))
  t.equal(limiter.running, 0)
})

t.test('the queue has a limit, 8 per slot: `full` says one more waiter would pass it', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 1 })
  const holders = Array.from({ length: 8 }, () => holder(limiter))
  t.equal(limiter.full, false, 'one holds the slot, 7 wait')
  holders.push(holder(limiter))
  t.equal(limiter.full, true)
  limiter.leave()
  await settle()
  t.equal(limiter.full, false, 'room again once the queue moves')
  for (let i = 0; i < 8; i++) limiter.leave()
  await Promise.all(holders.map(async (h) => await h.done))
  t.equal(limiter.running, 0)
})

t.test('a waiter whose signal aborts leaves the queue at once and never holds a slot; the next one takes it', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 1 })
  const controller = new AbortController()
  const first = holder(limiter)
  const abandoned = limiter.enter(controller.signal)
  const next = holder(limiter)
  controller.abort(new Error('caller gone'))
  await t.rejects(abandoned, { message: 'caller gone' }, 'rejected while the slot is still taken')
  t.equal(limiter.queued, 1)
  limiter.leave()
  await next.done
  t.ok(first.entered() && next.entered())
  limiter.leave()
  t.equal(limiter.running, 0)
})

t.test('an already aborted signal is refused before waiting', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 1 })
  t.ok(limiter.tryEnter())
  await t.rejects(limiter.enter(AbortSignal.abort(new Error('too late'))), { message: 'too late' })
  t.equal(limiter.queued, 0)
})
