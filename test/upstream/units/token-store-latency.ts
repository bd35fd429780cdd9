import t from 'tap'
import { COMMAND_TIMEOUT_MS } from '../../../src/redis/health.ts'
import type { AccessToken } from '../../../src/upstream/access-token.ts'
import { silentLog } from '../../../src/upstream/log.ts'
import { TokenManager } from '../../../src/upstream/token-manager.ts'
import type { TokenStore } from '../../../src/upstream/token-store.ts'
import { EXCHANGE_DEADLINE_MS, retryDelay } from '../../../src/upstream/token-timing.ts'
import { Clock, FakeEndpoint, recordingTelemetry, settle, Timers } from '../../helper.ts'

// A slow Redis (each command answered within its bound, so not down) costs the token's callers time, never the
// exchange: the identity provider's deadline counts from when it is asked, for the owner of the exchange and for the
// instances waiting for it.

/** A Redis shared by instances, answering every command `latencyMs` later, on the test's timers. */
class SlowRedis {
  commands = 0
  token: AccessToken | undefined
  failingUntil = 0
  readonly marks: Array<{ at: number, ms: number }> = []
  #lock: string | undefined
  readonly #wakers: Array<() => void> = []
  readonly #timers: Timers
  readonly #clock: Clock
  readonly #latencyMs: number

  constructor (clock: Clock, timers: Timers, latencyMs: number) {
    this.#clock = clock
    this.#timers = timers
    this.#latencyMs = latencyMs
  }

  async #answer<T> (value: () => T): Promise<T> {
    this.commands++
    await new Promise((resolve) => { this.#timers.schedule(this.#latencyMs, () => { resolve(undefined) }) })
    return value()
  }

  store (instance: string): TokenStore {
    return {
      read: async () => await this.#answer(() => this.token),
      write: async (token) => { await this.#answer(() => { this.token = token }) },
      handBack: () => {}, // never away, never emptied
      onStored: () => {}, // no bus: a token is found by reading the store
      failingForMs: async () => await this.#answer(() => Math.max(0, this.failingUntil - this.#clock.now())),
      markFailing: async (ms) => {
        this.marks.push({ at: this.#clock.now(), ms })
        await this.#answer(() => { this.failingUntil = Math.max(this.failingUntil, this.#clock.now() + ms) })
      },
      claim: async () => await this.#answer(() => {
        if (this.#lock !== undefined) return { owner: false as const, settled: new Promise<undefined>((resolve) => { this.#wakers.push(() => { resolve(undefined) }) }) }
        this.#lock = instance
        return { owner: true as const, release: async () => { await this.#answer(() => { this.#lock = undefined; for (const wake of this.#wakers.splice(0)) wake() }) } }
      })
    }
  }
}

/** Instances on one slow Redis; the identity provider answers `providerMs` after it is asked. */
function fleet (latencyMs: number, providerMs = 0) {
  const clock = new Clock()
  const timers = new Timers(clock)
  const redis = new SlowRedis(clock, timers, latencyMs)
  const endpoint = new FakeEndpoint()
  const exchangedAt: number[] = []
  const exchange = endpoint.exchange
  endpoint.exchange = async () => {
    exchangedAt.push(clock.now())
    await new Promise((resolve) => { timers.schedule(providerMs, () => { resolve(undefined) }) })
    return await exchange()
  }
  const instance = (name: string) => {
    const telemetry = recordingTelemetry()
    const tokens = new TokenManager({ endpoint, store: redis.store(name), telemetry, log: silentLog, lockWaitMs: 10_000, now: clock.now, schedule: timers.schedule, random: () => 0 })
    return { tokens, telemetry }
  }
  return { clock, timers, redis, endpoint, exchangedAt, instance }
}

const LATENCIES = [0, 100, 300, COMMAND_TIMEOUT_MS - 1]

t.test('Redis answering each command within its bound, however slowly: one exchange, and the callers get its token', async (t) => {
  for (const latencyMs of LATENCIES) {
    const { clock, timers, redis, endpoint, exchangedAt, instance } = fleet(latencyMs)
    const { tokens, telemetry } = instance('a')
    let answeredAt: number | undefined
    const callers = Array.from({ length: 5 }, async () => await tokens.getToken().finally(() => { answeredAt ??= clock.now() }))
    await timers.advance(10 * COMMAND_TIMEOUT_MS)
    const got = await Promise.all(callers)
    t.same(new Set(got.map((token) => token.value)), new Set(['token-1']), `${latencyMs} ms a command: every caller got the token`)
    t.equal(endpoint.exchanges, 1, `${latencyMs} ms: one exchange`)
    t.same(telemetry.events, ['token:minted'], `${latencyMs} ms: no failure counted`)
    t.equal(tokens.state, 'held')
    // The callers waited for the store's steps and the exchange, then for the token's sharing and the lock's release.
    t.ok((answeredAt ?? Infinity) <= (exchangedAt[0] ?? NaN) + 2 * latencyMs, `${latencyMs} ms: answered ${answeredAt} after the exchange was sent at ${exchangedAt[0]}`)
    t.equal(redis.commands, 7, 'read and window, claim, read and window again, then write and release')
  }
})

t.test('with Redis slow, an instance waiting for another\'s exchange adopts its token: no failure, no window, one exchange', async (t) => {
  for (const latencyMs of LATENCIES) {
    const { timers, redis, endpoint, instance } = fleet(latencyMs, 600)
    const owner = instance('owner')
    const waiter = instance('waiter')
    const got = [owner.tokens.getToken(), waiter.tokens.getToken()]
    await timers.advance(10 * COMMAND_TIMEOUT_MS)
    t.same((await Promise.all(got)).map((token) => token.value), ['token-1', 'token-1'], `${latencyMs} ms a command: both have the owner's token`)
    t.equal(endpoint.exchanges, 1)
    t.same(waiter.telemetry.events, [], `${latencyMs} ms: the waiter counts no failure`)
    t.same(redis.marks, [], `${latencyMs} ms: nobody marked the provider failing`)
  }
})

t.test('with Redis slow, a hung identity provider fails at its own deadline, counted from when it was asked', async (t) => {
  for (const latencyMs of LATENCIES) {
    const { clock, timers, endpoint, exchangedAt, instance } = fleet(latencyMs)
    const { tokens, telemetry } = instance('a')
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

t.test('with Redis slow, the window a retry shares lasts until the retry\'s own deadline: the others refuse meanwhile', async (t) => {
  for (const latencyMs of LATENCIES) {
    const { timers, redis, endpoint, exchangedAt, instance } = fleet(latencyMs)
    const { tokens } = instance('a')
    endpoint.failing = true
    const first = tokens.getToken().catch(() => undefined)
    await timers.advance(10 * COMMAND_TIMEOUT_MS)
    await first
    endpoint.failing = false
    endpoint.hold = true
    await timers.advance(retryDelay(0))
    const retry = tokens.getToken().catch(() => undefined)
    await timers.advance(10 * COMMAND_TIMEOUT_MS)
    // The mark made as the retry started (the one after it is the retry's own failure, at its deadline).
    const mark = redis.marks.filter(({ at }) => at <= (exchangedAt[1] ?? -Infinity)).at(-1)
    t.equal(exchangedAt.length, 2, `${latencyMs} ms a command: the retry was sent`)
    t.ok((mark?.at ?? 0) + (mark?.ms ?? 0) >= (exchangedAt[1] ?? Infinity) + EXCHANGE_DEADLINE_MS,
      `${latencyMs} ms: marked at ${mark?.at} for ${mark?.ms} ms, the retry sent at ${exchangedAt[1]}`)
    endpoint.release()
    await retry
  }
})

t.test('an identity provider answering in 1.5 s, instances on one Redis: the others refuse during the window, then every instance has that one exchange\'s token', async (t) => {
  for (const latencyMs of [0, 100]) {
    const { clock, timers, exchangedAt, instance } = fleet(latencyMs, 1_500)
    const owner = instance('owner')
    const other = instance('other')
    const first = owner.tokens.getToken().catch((error: unknown) => error)
    await timers.advance(5 * latencyMs)
    const askedAt = exchangedAt[0] ?? NaN
    await timers.advance(askedAt + EXCHANGE_DEADLINE_MS + 2 * latencyMs - clock.now())
    t.match(await first, { code: 'UPSTREAM_AUTH_FAILED', message: /did not answer within/ }, `${latencyMs} ms a command: its caller told at the deadline`)
    const refused = other.tokens.getToken().catch((error: unknown) => error)
    await timers.advance(2 * latencyMs)
    t.match(await refused, { code: 'UPSTREAM_AUTH_FAILED', message: /failing/ }, 'the other instance refuses its caller during the window')
    await timers.advance(askedAt + 1_500 - clock.now())
    t.equal((await owner.tokens.getToken()).value, 'token-1', 'the answer serves the owner\'s next caller')
    await timers.advance(askedAt + EXCHANGE_DEADLINE_MS + retryDelay(0) + 3 * latencyMs - clock.now())
    const later = other.tokens.getToken()
    await timers.advance(2 * latencyMs)
    t.equal((await later).value, 'token-1', 'and, once the window is over, the other instance\'s')
    t.equal(exchangedAt.length, 1, 'one exchange')
  }
})
