import t from 'tap'
import { COMMAND_TIMEOUT_MS } from '../../../src/redis/health.ts'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import type { TokenStore } from '../../../src/upstream/token-store.ts'
import { EXCHANGE_DEADLINE_MS } from '../../../src/upstream/token-timing.ts'
import { Clock, FakeEndpoint, recordingTelemetry, settle, Timers } from '../../helper.ts'
import { silentLog } from '../../../src/upstream/log.ts'

// A slow Redis (each command answered within its bound, so not down) costs the token's callers time, never the
// exchange: the identity provider's deadline counts from when it is asked.

/** An empty shared store on a Redis answering every command `latencyMs` later, on the test's timers. */
function slowStore (timers: Timers, latencyMs: number): TokenStore & { commands: number } {
  const store = {
    commands: 0,
    async answer<T> (value: T): Promise<T> {
      store.commands++
      await new Promise((resolve) => { timers.schedule(latencyMs, () => { resolve(undefined) }) })
      return value
    },
    read: async () => await store.answer(undefined),
    write: async () => { await store.answer(undefined) },
    claim: async () => await store.answer({ owner: true as const, release: async () => { await store.answer(undefined) } }),
    failingForMs: async () => await store.answer(0),
    markFailing: async () => { await store.answer(undefined) }
  }
  return store
}

function manager (latencyMs: number) {
  const clock = new Clock()
  const timers = new Timers(clock)
  const endpoint = new FakeEndpoint()
  const exchangedAt: number[] = []
  const exchange = endpoint.exchange
  endpoint.exchange = async () => { exchangedAt.push(clock.now()); return await exchange() }
  const store = slowStore(timers, latencyMs)
  const telemetry = recordingTelemetry()
  const tokens = new TokenManager({ endpoint, store, telemetry, log: silentLog, lockWaitMs: 10_000, now: clock.now, schedule: timers.schedule, random: () => 0 })
  return { clock, timers, endpoint, exchangedAt, store, telemetry, tokens }
}

t.test('Redis answering each command within its bound, however slowly: one exchange, and the callers get its token', async (t) => {
  for (const latencyMs of [0, 100, 300, COMMAND_TIMEOUT_MS - 1]) {
    const { clock, timers, endpoint, exchangedAt, store, telemetry, tokens } = manager(latencyMs)
    const started = clock.now()
    let answeredAt: number | undefined
    const callers = Array.from({ length: 5 }, async () => await tokens.getToken().finally(() => { answeredAt ??= clock.now() }))
    await timers.advance(10 * COMMAND_TIMEOUT_MS)
    const got = await Promise.all(callers)
    t.same(new Set(got.map((token) => token.value)), new Set(['token-1']), `${latencyMs} ms a command: every caller got the token`)
    t.equal(endpoint.exchanges, 1, `${latencyMs} ms: one exchange`)
    t.same(telemetry.events, ['token:minted'], `${latencyMs} ms: no failure counted`)
    t.equal(tokens.state, 'held')
    // The callers waited for the store's steps and the exchange, then for the token's sharing and the lock's release.
    t.ok((answeredAt ?? Infinity) <= (exchangedAt[0] ?? NaN) + 2 * latencyMs, `${latencyMs} ms: answered ${(answeredAt ?? 0) - started} ms in, the exchange sent ${(exchangedAt[0] ?? 0) - started} ms in`)
    t.equal(store.commands, 7, 'read and window, claim, read and window again, then write and release')
  }
})

t.test('with Redis slow, a hung identity provider fails at its own deadline, counted from when it was asked', async (t) => {
  for (const latencyMs of [0, 300, COMMAND_TIMEOUT_MS - 1]) {
    const { clock, timers, endpoint, exchangedAt, telemetry, tokens } = manager(latencyMs)
    endpoint.hold = true
    let failedAt: number | undefined
    const caller = tokens.getToken().catch((error: unknown) => { failedAt = clock.now(); return error })
    await timers.advance(10 * COMMAND_TIMEOUT_MS)
    t.match(await caller, { code: 'UPSTREAM_AUTH_FAILED', message: /did not answer within/ }, `${latencyMs} ms a command`)
    t.equal(failedAt, (exchangedAt[0] ?? NaN) + EXCHANGE_DEADLINE_MS, `${latencyMs} ms: failed its deadline after the exchange was sent`)
    t.same(telemetry.events, ['token:failed'])
    endpoint.release()
    await settle()
  }
})
