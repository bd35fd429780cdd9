import { EventEmitter } from 'node:events'
import type { FastifyReply } from 'fastify'
import t from 'tap'
import { CallerGone, callerSignal } from '../../src/http/caller-signal.ts'

/** The slice of a reply the signal reads: its raw response's state and 'close'. */
function reply (state: { destroyed?: boolean, writableFinished?: boolean } = {}) {
  const raw = Object.assign(new EventEmitter(), { destroyed: false, writableFinished: false, ...state })
  return { raw, reply: { raw } as unknown as FastifyReply }
}

t.test('nothing is built until the signal is asked for: a cache hit pays for no controller and no listener', async (t) => {
  const { raw, reply: r } = reply()
  const signal = callerSignal(r)
  t.equal(raw.listenerCount('close'), 0)
  t.equal(signal(), signal(), 'built once')
  t.equal(raw.listenerCount('close'), 1)
})

t.test('a connection closed before the answer was sent aborts it; one closed after a complete answer does not', async (t) => {
  const gone = reply()
  const left = callerSignal(gone.reply)()
  gone.raw.emit('close')
  t.ok(left.aborted)
  t.ok(left.reason instanceof CallerGone)

  const served = reply()
  const answered = callerSignal(served.reply)()
  served.raw.writableFinished = true
  served.raw.emit('close')
  t.notOk(answered.aborted)
})

t.test('a caller already gone when the signal is first asked for is gone at once', async (t) => {
  const { raw, reply: r } = reply({ destroyed: true })
  t.ok(callerSignal(r)().aborted)
  t.equal(raw.listenerCount('close'), 0)
})
