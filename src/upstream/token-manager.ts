import { untilAborted } from '../cancellation.ts'
import { UPSTREAM_AUTH_FAILED } from '../errors.ts'
import type { Telemetry } from '../telemetry/telemetry.ts'
import { currentSpan, inSpan } from '../telemetry/tracing.ts'
import type { AccessToken } from './access-token.ts'
import type { UpstreamLog } from './log.ts'
import { askedToWaitMs, type MintedToken } from './token-endpoint.ts'
import { realTimers, type Schedule } from './budget/schedule.ts'
import type { TokenStore } from './token-store.ts'
import { TokenFailures } from './token-failures.ts'
import { TokenSharing } from './token-sharing.ts'
import { EXCHANGE_DEADLINE_MS, renewalDue, usableUntil } from './token-timing.ts'
import { ExchangeDeadline } from './exchange-deadline.ts'
import { steadyNow } from '../steady-clock.ts'

/** What /readyz reports: no token yet, one held, an exchange under way, or the identity provider failing. */
export type TokenState = 'none' | 'held' | 'renewing' | 'failing'
export interface TokenManagerOptions {
  /** `signal` aborts an exchange given up on. */
  endpoint: { exchange: (signal: AbortSignal) => Promise<MintedToken> }
  /** With Redis: the token shared by every instance. Without: this instance's own. */
  store?: TokenStore
  telemetry: Telemetry
  log: UpstreamLog
  /** How long an instance waits for another instance's exchange before giving up on it. */
  lockWaitMs: number
  now?: () => number
  /** The deadline's timer, on the clock of `now` (tests move one). */
  schedule?: Schedule
  random?: () => number
}

/** One exchange (or wait for another instance's): `callers` ends their wait at the provider's deadline, `controller` the exchange. */
interface Renewal { promise: Promise<AccessToken>, controller: AbortController, callers: AbortController, deadline: ExchangeDeadline }
type Exchange = Omit<Renewal, 'promise'>

/**
 * Holds the client-credentials token. One exchange per lifetime: a token past `renewalDue` is still handed out while
 * one renewal runs in the background; one exchange at a time, shared by its callers, and with a store one across
 * instances (a Redis lock; the others are woken by its release). Before any failure, callers without a usable token
 * wait for the exchange under way: the store's steps (Redis's bound each), the provider's answer (EXCHANGE_DEADLINE_MS
 * at most). Once one failed (or passed that deadline: it runs on until the retry is due, its answer taken), they are
 * refused at once during the back-off and while a retry runs (its starter waits); the token store's failure window (`…:failing`) shares both.
 * A token another instance stored ends them here too, once the bus tells of it (TokenSharing reads it once).
 */
export class TokenManager {
  readonly #endpoint: TokenManagerOptions['endpoint']
  readonly #store: TokenStore | undefined
  /** With a store: its steps around each exchange. */
  readonly #sharing: TokenSharing | undefined
  readonly #telemetry: Telemetry
  readonly #log: UpstreamLog
  readonly #now: () => number
  readonly #schedule: Schedule
  readonly #failures: TokenFailures
  #current: AccessToken | undefined
  /** The last token the upstream refused: never adopted again from the store. */
  #rejected: string | undefined
  #renewal: Renewal | undefined
  /** An exchange past its deadline, still listened to until the retry is due. */
  #lingering: Renewal | undefined

  constructor (options: TokenManagerOptions) {
    this.#endpoint = options.endpoint
    this.#store = options.store
    this.#telemetry = options.telemetry
    this.#log = options.log
    this.#now = options.now ?? steadyNow
    this.#schedule = options.schedule ?? realTimers
    this.#failures = new TokenFailures(this.#now, options.random ?? Math.random)
    const { store, log, lockWaitMs } = options
    this.#sharing = store === undefined
      ? undefined
      : new TokenSharing({
        store,
        failures: this.#failures,
        log,
        lockWaitMs,
        now: this.#now,
        schedule: this.#schedule,
        held: () => this.#usable(this.#current) ? this.#current : undefined,
        rejected: () => this.#rejected,
        adopt: (token) => { this.#adopt(token) }
      })
  }

  /** `failing` from the first failed (or overdue) exchange until a usable token is held again. */
  get state (): TokenState {
    const renewal = this.#renewal
    if (this.#usable(this.#current)) return renewal === undefined ? 'held' : 'renewing'
    if (this.#failures.failing || renewal?.deadline.passed === true) return 'failing'
    return renewal === undefined ? 'none' : 'renewing'
  }

  /** Why no token can be had, while `state` is `failing`: never a token or a secret. */
  get failure (): string | undefined {
    if (this.state !== 'failing') return undefined
    return this.#renewal?.deadline.passed === true ? 'the identity provider has not answered the current exchange' : this.#failures.reason
  }

  /** In a span that says how the token was had: `held`, `renewed` (an exchange started), `waited` (for one under way) or `adopted` (another instance's). */
  async getToken (): Promise<AccessToken> {
    return await inSpan('upstream.token', {}, async (span) => {
      const current = this.#current
      if (current !== undefined && this.#usable(current)) {
        span.setAttribute('pbff.token', 'held')
        if (this.#now() >= renewalDue(current)) this.#renewInBackground()
        return current
      }
      return await this.#renew()
    })
  }

  /** Whether `refusesNow` would refuse, settling nothing (an exchange past its deadline counts as a retry running). */
  get refusing (): boolean { return !this.#usable(this.#current) && this.#sharing?.adopting === undefined && this.#failures.refuses(this.#renewal !== undefined) }

  /** A caller's refusal known at once: no usable token, the provider failing (back-off, retry under way); else undefined. */
  refusesNow (): Error | undefined {
    // Another instance's token is being read: the caller waits for it (getToken), one Redis step at most.
    if (this.#usable(this.#current) || this.#sharing?.adopting !== undefined) return undefined
    this.#settleOverdue()
    return this.#failures.refusal(this.#renewal !== undefined)
  }

  /** Forget `token` after the upstream refused it (a newer one stays); `renewedInVain`: that was its renewal, a failed exchange. */
  invalidate (token: AccessToken, renewedInVain = false): void {
    this.#rejected = token.value
    if (this.#current?.value !== token.value) return
    this.#current = undefined
    if (renewedInVain) this.#failed(new UPSTREAM_AUTH_FAILED('the profile service refused a renewed token too'), this.#now()).catch(() => {})
  }

  #usable (token: AccessToken | undefined): token is AccessToken { return token !== undefined && this.#now() < usableUntil(token) }

  /** A usable token is had again: whatever back-off this instance kept (its own or the store's window) is over. */
  #adopt (token: AccessToken): void {
    const current = this.#current
    if (current !== undefined && this.#usable(current) && this.#now() < renewalDue(current)) return
    this.#current = token
    this.#failures.clear()
  }

  #renewInBackground (): void {
    this.#settleOverdue()
    if (this.#renewal !== undefined || this.#failures.backingOff || this.#sharing?.renewalPutOff === true) return
    this.#start().promise.catch(() => {}) // counted and logged where it fails; the current token serves meanwhile
  }

  /** An exchange past its deadline has failed, at its deadline; once the retry is due it is aborted (whenever a caller notices). */
  #settleOverdue (): void {
    const renewal = this.#renewal
    if (renewal?.deadline.passed === true) this.#overdue(renewal)
    const lingering = this.#lingering
    if (lingering?.deadline.passed === true) lingering.controller.abort(new UPSTREAM_AUTH_FAILED('the identity provider did not answer before the retry was due'))
  }

  async #renew (): Promise<AccessToken> {
    const adopting = this.#sharing?.adopting
    if (adopting !== undefined && await adopting !== undefined && this.#usable(this.#current)) {
      currentSpan().setAttribute('pbff.token', 'adopted')
      return this.#current
    }
    // After a failure only the caller that started the retry waits for it.
    const refused = this.refusesNow()
    if (refused !== undefined) throw refused
    const renewal = this.#renewal
    if (renewal !== undefined) {
      currentSpan().setAttribute('pbff.token', 'waited')
      return await renewal.promise
    }
    currentSpan().setAttribute('pbff.token', 'renewed')
    return await this.#start().promise
  }

  #start (): Renewal {
    const controller = new AbortController()
    const callers = new AbortController()
    const deadline = new ExchangeDeadline(this.#now, this.#schedule, () => { if (this.#renewal === renewal || this.#lingering === renewal) this.#settleOverdue() })
    const exchange = untilAborted(this.#obtain({ controller, callers, deadline }), controller.signal)
      .then((token) => {
        this.#current = token
        this.#failures.clear()
        return token
      })
      .finally(() => {
        deadline.stop()
        if (this.#renewal === renewal) this.#renewal = undefined
        if (this.#lingering === renewal) this.#lingering = undefined
      })
    const renewal: Renewal = { controller, callers, deadline, promise: untilAborted(exchange, callers.signal) }
    this.#renewal = renewal
    return renewal
  }

  /** Failed at its deadline (the back-off counted and shared from there), its callers told; it runs on, the lock held, until the retry is due. */
  #overdue (renewal: Renewal): void {
    this.#renewal = undefined
    this.#lingering = renewal
    const error = new UPSTREAM_AUTH_FAILED(`the identity provider did not answer within ${EXCHANGE_DEADLINE_MS} ms`)
    this.#failed(error, renewal.deadline.at).catch(() => {})
    renewal.deadline.linger(this.#failures.remainingMs)
    renewal.callers.abort(error)
  }

  async #obtain (exchange: Exchange): Promise<AccessToken> {
    const mint = async (): Promise<AccessToken> => await this.#mint(exchange)
    return this.#sharing === undefined ? await mint() : await this.#sharing.obtain(mint)
  }

  async #mint ({ controller: { signal }, callers, deadline }: Exchange): Promise<AccessToken> {
    const issuedAt = this.#now()
    deadline.start()
    try {
      const { value, lifetimeMs } = await untilAborted(this.#endpoint.exchange(signal), signal).finally(() => { deadline.stop() })
      this.#telemetry.tokenExchange('minted')
      this.#log.info({ lifetimeSeconds: lifetimeMs / 1000 }, 'upstream token minted')
      // New callers go on with it while it is shared and the lock let go.
      this.#current = { value, issuedAt, expiresAt: issuedAt + lifetimeMs }
      return this.#current
    } catch (error) {
      // One past its deadline was counted then, unless the provider now asks for a longer pause.
      if (!signal.aborted && (!callers.signal.aborted || askedToWaitMs(error) > 0)) await this.#failed(error, this.#now())
      throw error
    }
  }

  /** Counts an exchange failed at `failedAt`; the back-off counts from then, here and (the store's window) everywhere. */
  async #failed (error: unknown, failedAt: number): Promise<void> {
    const delayMs = this.#failures.record(error instanceof Error ? error.message : 'the exchange failed', failedAt, askedToWaitMs(error))
    this.#telemetry.tokenExchange('failed')
    this.#log.warn({ err: error, attempt: this.#failures.count, retryInMs: delayMs }, 'token exchange failed')
    const leftMs = this.#failures.remainingMs
    if (leftMs > 0) await this.#store?.markFailing(leftMs)
  }
}
