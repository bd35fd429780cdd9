import t from 'tap'
import { untilAborted } from '../../../src/cancellation.ts'
import { UPSTREAM_AUTH_FAILED } from '../../../src/errors.ts'
import type { MintedToken } from '../../../src/upstream/token-endpoint.ts'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import { EXCHANGE_DEADLINE_MS, retryDelay } from '../../../src/upstream/token-timing.ts'
import { Clock, recordingLog, recordingTelemetry, settle, Timers } from '../../helper.ts'

// An identity provider slower than the exchange's deadline but quicker than the retry: callers are refused from the
// deadline, and its answer, when it comes, serves the next ones (until 2026-12, the exchange was aborted at its
// deadline and retried the same way forever: a provider answering in 1.2 s never gave a token).

/** Answers each exchange `latencyMs` after it is asked, on the test's timers (Infinity: never); counts what is in flight. */
class SlowProvider {
  asked = 0
  inFlight = 0
  mostInFlight = 0
  latencyMs: number
  readonly #timers: Timers

  constructor (timers: Timers, latencyMs: number) {
    this.#timers = timers
    this.latencyMs = latencyMs
  }

  exchange = async (signal: AbortSignal): Promise<MintedToken> => {
    const n = ++this.asked
    this.inFlight++
    this.mostInFlight = Math.max(this.mostInFlight, this.inFlight)
    const answer = new Promise<MintedToken>((resolve) => {
      this.#timers.schedule(this.latencyMs, () => { resolve({ value: `token-${n}`, lifetimeMs: 3_600_000 }) })
    })
    try {
      return await untilAborted(answer, signal)
    } finally {
      this.inFlight--
    }
  }
}

function manager (latencyMs: number, random: number) {
  const clock = new Clock()
  const timers = new Timers(clock)
  const provider = new SlowProvider(timers, latencyMs)
  const telemetry = recordingTelemetry()
  const tokens = new TokenManager({
    endpoint: provider, telemetry, log: recordingLog(), lockWaitMs: 1_000, now: clock.now, schedule: timers.schedule, random: () => random
  })
  return { tokens, timers, provider, telemetry }
}

/** What a caller gets within a turn of the event loop: a token's value, an error's code, or `held` (still waiting). */
async function atOnce (tokens: TokenManager): Promise<string> {
  let outcome = 'held'
  tokens.getToken().then((token) => { outcome = token.value }, (error: { code?: string }) => { outcome = error.code ?? 'error' })
  await settle()
  return outcome
}

t.test('an identity provider answering in 1.2 s or 1.8 s: callers refused from the deadline, then served by that one exchange', async (t) => {
  for (const latencyMs of [1_200, 1_800]) {
    for (const random of [0, 1]) {
      const { tokens, timers, provider, telemetry } = manager(latencyMs, random)
      const first = tokens.getToken().catch((error: unknown) => error)
      await timers.advance(EXCHANGE_DEADLINE_MS)
      t.match(await first, { code: 'UPSTREAM_AUTH_FAILED', message: /did not answer within 1000 ms/ }, `${latencyMs} ms: its caller told at the deadline`)
      t.equal(await atOnce(tokens), 'UPSTREAM_AUTH_FAILED', `${latencyMs} ms: a caller after the deadline refused at once`)
      t.equal(tokens.state, 'failing')
      await timers.advance(latencyMs - EXCHANGE_DEADLINE_MS)
      t.equal(await atOnce(tokens), 'token-1', `${latencyMs} ms, random ${random}: the next caller has its token at once`)
      t.equal(tokens.state, 'held')
      t.equal(provider.asked, 1, 'one exchange')
      t.same(telemetry.events, ['token:failed', 'token:minted'])
    }
  }
})

t.test('a provider silent until the retry is due: the exchange is listened to until then, aborted then, and the retry asks anew; never two at once', async (t) => {
  for (const random of [0, 1]) {
    const { tokens, timers, provider } = manager(Infinity, random)
    const first = tokens.getToken().catch(() => undefined)
    await timers.advance(EXCHANGE_DEADLINE_MS + retryDelay(random) - 1)
    await first
    t.equal(provider.inFlight, 1, `random ${random}: still listened to 1 ms before the retry is due`)
    t.equal(await atOnce(tokens), 'UPSTREAM_AUTH_FAILED', 'its callers refused meanwhile')
    await timers.advance(1)
    t.equal(provider.inFlight, 0, 'aborted when the retry is due')
    provider.latencyMs = 50
    const retry = tokens.getToken()
    t.equal(provider.asked, 2, 'the next caller starts the retry')
    await timers.advance(50)
    t.equal((await retry).value, 'token-2')
    t.equal(provider.mostInFlight, 1)
  }
})

t.test('a provider asking for a pause (429, Retry-After 30 s) is left alone that long, whether it answers before the deadline or after it', async (t) => {
  for (const latencyMs of [800, 1_200]) {
    const { tokens, timers, provider } = manager(latencyMs, 0)
    provider.exchange = async (signal: AbortSignal): Promise<MintedToken> => {
      provider.asked++
      const answer = new Promise<MintedToken>((_resolve, reject) => {
        timers.schedule(latencyMs, () => { reject(Object.assign(new UPSTREAM_AUTH_FAILED('the identity provider answered 429'), { askedToWaitMs: 30_000 })) })
      })
      return await untilAborted(answer, signal)
    }
    tokens.getToken().catch(() => {})
    await timers.advance(latencyMs)
    await timers.advance(25_000)
    t.equal(await atOnce(tokens), 'UPSTREAM_AUTH_FAILED', `${latencyMs} ms: a caller 25 s later refused at once`)
    t.equal(provider.asked, 1, `${latencyMs} ms: no exchange before the 30 s it asked`)
  }
})
