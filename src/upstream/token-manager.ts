import { untilAborted } from '../cancellation.ts'
import { UPSTREAM_AUTH_FAILED } from '../errors.ts'
import type { Telemetry } from '../telemetry/telemetry.ts'
import { currentSpan, inSpan, linkTo } from '../telemetry/tracing.ts'
import type { AccessToken } from './access-token.ts'
import type { UpstreamLog } from './log.ts'
import type { MintedToken } from './token-endpoint.ts'
import type { Claim } from '../redis/owner-lock.ts'
import type { TokenStore } from './token-store.ts'
import { renewalDue, retryDelay, usableUntil } from './token-timing.ts'

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
  random?: () => number
}

/** One exchange (or wait for another instance's), and when it is given up on if the provider has not answered. */
interface Renewal {
  promise: Promise<AccessToken>
  controller: AbortController
  givesUpAt: number
}

/**
 * Holds the client-credentials token. One exchange per lifetime: a token past `renewalDue` is still
 * handed out while one renewal runs in the background, so callers wait only when there is no usable
 * token at all. One exchange at a time, however many callers ask (they share one promise), and with a
 * store, one across instances (a Redis lock; the others are woken by its release). After a failed exchange
 * callers get UPSTREAM_AUTH_FAILED at once until the back-off ends, instead of one exchange each.
 * An exchange the provider has not answered by the time a failed one would have been retried is given up on
 * (aborted, counted as a failure) and the next caller starts another at once: a hung provider is retried on the
 * same schedule as a failing one, so callers recover as soon after it answers again.
 */
export class TokenManager {
  readonly #endpoint: TokenManagerOptions['endpoint']
  readonly #store: TokenStore | undefined
  readonly #telemetry: Telemetry
  readonly #log: UpstreamLog
  readonly #lockWaitMs: number
  readonly #now: () => number
  readonly #random: () => number
  #current: AccessToken | undefined
  /** The last token the upstream refused: never adopted again from the store. */
  #rejected: string | undefined
  #renewal: Renewal | undefined
  #failures = 0
  #retryAt = 0
  /** Why the last exchange failed, for /readyz; cleared by a token. */
  #lastFailure: string | undefined

  constructor (options: TokenManagerOptions) {
    this.#endpoint = options.endpoint
    this.#store = options.store
    this.#telemetry = options.telemetry
    this.#log = options.log
    this.#lockWaitMs = options.lockWaitMs
    this.#now = options.now ?? Date.now
    this.#random = options.random ?? Math.random
  }

  /**
   * `failing` from the first failed (or given up) exchange until a usable token is held again, whatever runs
   * meanwhile: with a token, calls still succeed until it is due; without one, none does.
   */
  get state (): TokenState {
    const renewal = this.#renewal
    if (this.#usable(this.#current)) return renewal === undefined ? 'held' : 'renewing'
    if (this.#failures > 0 || (renewal !== undefined && this.#overdue(renewal))) return 'failing'
    return renewal === undefined ? 'none' : 'renewing'
  }

  /** Why no token can be had, while `state` is `failing`: never a token or a secret. */
  get failure (): string | undefined {
    if (this.state !== 'failing') return undefined
    const renewal = this.#renewal
    if (renewal !== undefined && this.#overdue(renewal)) return 'the identity provider has not answered the current exchange'
    return this.#lastFailure
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

  /** Forget `token` after the upstream refused it; a newer one that replaced it meanwhile stays. */
  invalidate (token: AccessToken): void {
    this.#rejected = token.value
    if (this.#current?.value === token.value) this.#current = undefined
  }

  #usable (token: AccessToken | undefined): token is AccessToken {
    return token !== undefined && this.#now() < usableUntil(token)
  }

  #renewInBackground (): void {
    const renewal = this.#renewal
    if ((renewal !== undefined && !this.#overdue(renewal)) || this.#now() < this.#retryAt) return
    // A failure is logged and counted where it happens; the current token serves while it is usable.
    this.#renew().catch(() => {})
  }

  /** An exchange unanswered past the moment a failed one would have been retried. */
  #overdue (renewal: Renewal): boolean {
    return this.#now() >= renewal.givesUpAt
  }

  async #renew (): Promise<AccessToken> {
    const renewal = this.#renewal
    if (renewal !== undefined && !this.#overdue(renewal)) {
      currentSpan().setAttribute('pbff.token', 'waited')
      return await renewal.promise
    }
    currentSpan().setAttribute('pbff.token', 'renewed')
    if (renewal !== undefined) this.#giveUp(renewal)
    else if (this.#retryAt > this.#now()) throw backingOff(this.#retryAt - this.#now())
    return await this.#start().promise
  }

  #start (): Renewal {
    const controller = new AbortController()
    const renewal: Renewal = {
      controller,
      givesUpAt: this.#now() + retryDelay(this.#failures + 1, this.#random()),
      promise: untilAborted(this.#obtain(controller.signal), controller.signal)
        .then((token) => {
          this.#current = token
          this.#failures = 0
          this.#retryAt = 0
          this.#lastFailure = undefined
          return token
        })
        .finally(() => { if (this.#renewal === renewal) this.#renewal = undefined })
    }
    this.#renewal = renewal
    return renewal
  }

  /** Aborts an overdue exchange, counted as a failure; the next one starts at once (its wait is already served). */
  #giveUp (renewal: Renewal): void {
    this.#renewal = undefined
    const error = new UPSTREAM_AUTH_FAILED('the identity provider did not answer in time; trying again')
    this.#failed(error, false)
    renewal.controller.abort(error)
  }

  async #obtain (signal: AbortSignal): Promise<AccessToken> {
    const store = this.#store
    if (store === undefined) return await this.#mint(signal)
    const deadline = this.#now() + this.#lockWaitMs
    for (;;) {
      const shared = await this.#fromStore(store)
      if (shared !== undefined) {
        currentSpan().setAttribute('pbff.token', 'adopted')
        return shared
      }
      signal.throwIfAborted()
      const claim = await store.claim()
      if (claim.owner) return await this.#mintAsOwner(store, claim, signal)
      if (this.#now() >= deadline) throw new UPSTREAM_AUTH_FAILED('another instance is still exchanging credentials')
      const span = currentSpan()
      span.setAttribute('pbff.token', 'waited')
      // The other instance's exchange, when the message that ended the wait named it.
      linkTo(span, await claim.settled)
    }
  }

  async #mintAsOwner (store: TokenStore, claim: Claim & { owner: true }, signal: AbortSignal): Promise<AccessToken> {
    try {
      // The previous owner may have finished between our look and our lock.
      const shared = await this.#fromStore(store)
      if (shared !== undefined) return shared
      const token = await this.#mint(signal)
      await store.write(token)
      return token
    } finally {
      await claim.release()
    }
  }

  /** A shared token worth adopting; throws during a failure window another instance opened. */
  async #fromStore (store: TokenStore): Promise<AccessToken | undefined> {
    const shared = await store.read()
    if (shared !== undefined && shared.value !== this.#rejected && this.#now() < renewalDue(shared)) return shared
    const failingMs = await store.failingForMs()
    if (failingMs > 0) {
      this.#failures = Math.max(this.#failures, 1)
      this.#retryAt = this.#now() + failingMs
      this.#lastFailure = 'another instance found the identity provider failing'
      throw backingOff(failingMs)
    }
    return undefined
  }

  async #mint (signal: AbortSignal): Promise<AccessToken> {
    const issuedAt = this.#now()
    try {
      const { value, lifetimeMs } = await untilAborted(this.#endpoint.exchange(signal), signal)
      this.#telemetry.tokenExchange('minted')
      this.#log.info({ lifetimeSeconds: lifetimeMs / 1000 }, 'upstream token minted')
      return { value, issuedAt, expiresAt: issuedAt + lifetimeMs }
    } catch (error) {
      // An exchange given up on was counted then.
      if (signal.aborted) throw error
      const delayMs = this.#failed(error, true)
      await this.#store?.markFailing(delayMs)
      throw error
    }
  }

  /** Counts a failed exchange; the next may start after the back-off (or at once). Returns that delay. */
  #failed (error: unknown, backOff: boolean): number {
    this.#failures++
    const delayMs = backOff ? retryDelay(this.#failures, this.#random()) : 0
    this.#retryAt = this.#now() + delayMs
    this.#lastFailure = error instanceof Error ? error.message : 'the exchange failed'
    this.#telemetry.tokenExchange('failed')
    this.#log.warn({ err: error, attempt: this.#failures, retryInMs: delayMs }, 'token exchange failed')
    return delayMs
  }
}

function backingOff (waitMs: number): Error {
  return new UPSTREAM_AUTH_FAILED(`the identity provider is failing; next attempt in ${Math.ceil(waitMs / 1000)} s`)
}
