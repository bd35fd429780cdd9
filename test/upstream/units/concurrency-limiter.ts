import t from 'tap'
import { ConcurrencyLimiter } from '../../../src/upstream/concurrency-limiter.ts'
import { settle } from '../../helper.ts'

/** A task that runs until the test ends it. */
function gate (): { task: () => Promise<string>, open: () => void, started: () => boolean } {
  let release = (): void => {}
  let started = false
  const done = new Promise<void>((resolve) => { release = resolve })
  return {
    task: async () => { started = true; await done; return 'done' },
    open: () => release(),
    started: () => started
  }
}

t.test('runs at most `concurrency` tasks, the others in order as slots free up', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 2, queueLimit: 10 })
  const gates = Array.from({ length: 4 }, gate)
  const results = gates.map(async (g) => await limiter.run(g.task))
  await settle()
  t.same(gates.map((g) => g.started()), [true, true, false, false])
  t.equal(limiter.running, 2)
  t.equal(limiter.queued, 2)
  gates[1]?.open()
  await settle()
  t.same(gates.map((g) => g.started()), [true, true, true, false], 'the first in line takes the freed slot')
  for (const g of gates) g.open()
  t.same(await Promise.all(results), ['done', 'done', 'done', 'done'])
  t.equal(limiter.running, 0)
})

t.test('a full queue refuses at once with 503 UPSTREAM_OVERLOADED', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 1, queueLimit: 2 })
  const gates = Array.from({ length: 3 }, gate)
  const accepted = gates.map(async (g) => await limiter.run(g.task))
  await t.rejects(limiter.run(async () => 'never'), { code: 'UPSTREAM_OVERLOADED', statusCode: 503 })
  for (const g of gates) g.open()
  await Promise.all(accepted)
  t.equal(await limiter.run(async () => 'room again'), 'room again')
})

t.test('a failing task frees its slot', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 1, queueLimit: 0 })
  await t.rejects(limiter.run(async () => { throw new Error('boom') }), { message: 'boom' })
  t.equal(limiter.running, 0)
  t.equal(await limiter.run(async () => 'next'), 'next')
})

t.test('a waiter whose signal aborts leaves the queue at once and never runs; the next one takes the slot', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 1, queueLimit: 2 })
  const [running, abandoned, next] = [gate(), gate(), gate()]
  const controller = new AbortController()
  const first = limiter.run(running.task)
  const dropped = limiter.run(abandoned.task, controller.signal)
  const second = limiter.run(next.task)
  controller.abort(new Error('caller gone'))
  await t.rejects(dropped, { message: 'caller gone' }, 'rejected while the slot is still taken')
  t.equal(limiter.queued, 1)
  running.open()
  next.open()
  t.same(await Promise.all([first, second]), ['done', 'done'])
  t.notOk(abandoned.started(), 'the abandoned task never ran')
  t.equal(limiter.running, 0)
})

t.test('an already aborted signal is refused before taking a slot', async (t) => {
  const limiter = new ConcurrencyLimiter({ concurrency: 1, queueLimit: 1 })
  await t.rejects(limiter.run(async () => 'never', AbortSignal.abort(new Error('too late'))), { message: 'too late' })
  t.equal(limiter.running, 0)
})
