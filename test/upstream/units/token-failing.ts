import t from 'tap'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import { EXCHANGE_DEADLINE_MS, retryDelay } from '../../../src/upstream/token-timing.ts'
import { Clock, FakeEndpoint, recordingLog, recordingTelemetry, settle, Timers } from '../../helper.ts'

/** Whether `getToken` settled within a turn of the event loop: a caller answered at once rather than held. */
async function answeredAtOnce (tokens: TokenManager): Promise<boolean> {
  let settled = false
  tokens.getToken().then(() => { settled = true }, () => { settled = true })
  await settle()
  return settled
}

t.test('after a failure, a retry under way holds only the caller that started it; the others are refused at once', async (t) => {
  for (const fault of ['failing', 'hung'] as const) {
    const endpoint = new FakeEndpoint()
    const clock = new Clock()
    const tokens = new TokenManager({ endpoint, telemetry: recordingTelemetry(), log: recordingLog(), lockWaitMs: 1_000, now: clock.now, random: () => 0 })
    endpoint.failing = fault === 'failing'
    endpoint.hold = true
    const before = tokens.getToken().catch((error: unknown) => error)
    t.notOk(await answeredAtOnce(tokens), `${fault}: before any failure, callers wait for the exchange under way`)
    if (fault === 'failing') endpoint.release()
    else clock.advance(EXCHANGE_DEADLINE_MS)
    endpoint.hold = true
    t.ok(await answeredAtOnce(tokens), `${fault}: refused at once once it failed`)
    t.match(await before, { code: 'UPSTREAM_AUTH_FAILED' })
    clock.advance(retryDelay(0))
    const starter = tokens.getToken().catch((error: unknown) => error)
    t.equal(endpoint.exchanges, 2)
    const others = await Promise.all(Array.from({ length: 20 }, async () => await answeredAtOnce(tokens)))
    t.same(new Set(others), new Set([true]), `${fault}: 20 callers during the retry refused at once`)
    t.equal(endpoint.exchanges, 2, `${fault}: without an exchange of their own`)
    endpoint.release()
    t.equal(((await starter) as { value?: string }).value, fault === 'failing' ? undefined : 'token-2')
  }
})

t.test('a hung provider and closed-loop callers: at least 95% after the first failure are answered at once, attempts spaced by the back-off from each deadline', async (t) => {
  for (const random of [0, 0.5, 1]) {
    const endpoint = new FakeEndpoint()
    endpoint.hold = true
    const clock = new Clock()
    const timers = new Timers(clock)
    const tokens = new TokenManager({
      endpoint, telemetry: recordingTelemetry(), log: recordingLog(), lockWaitMs: 1_000, now: clock.now, schedule: timers.schedule, random: () => random
    })
    const starts: number[] = []
    let afterFailure = 0
    let heldAfterFailure = 0
    // Ten callers, each asking again as soon as answered, for 20 s (five attempts at least): one round each 10 ms of the clock.
    const waiting = new Set<Promise<unknown>>()
    for (let elapsed = 0; elapsed < 20_000; elapsed += 10) {
      const failedYet = tokens.state === 'failing'
      for (let i = waiting.size; i < 10; i++) {
        const exchanges = endpoint.exchanges
        let settled = false
        const call: Promise<unknown> = tokens.getToken().catch(() => {}).finally(() => { settled = true; waiting.delete(call) })
        waiting.add(call)
        if (endpoint.exchanges > exchanges) starts.push(elapsed)
        await settle()
        if (failedYet) {
          afterFailure++
          if (!settled) heldAfterFailure++
        }
      }
      await timers.advance(10)
    }
    t.ok(afterFailure > 10_000, `random ${random}: ${afterFailure} callers after the first failure`)
    t.ok(heldAfterFailure / afterFailure <= 0.05, `random ${random}: ${heldAfterFailure} of them held for an exchange`)
    const gaps = starts.slice(1).map((start, i) => start - (starts[i] ?? 0))
    gaps.forEach((gap, i) => {
      const least = EXCHANGE_DEADLINE_MS + retryDelay(random)
      t.ok(gap >= least && gap <= least + 10, `random ${random}: attempt ${i + 2} ${gap} ms after the one before (deadline + back-off ${least} ms)`)
    })
    endpoint.release()
  }
})
