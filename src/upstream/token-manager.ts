import { UPSTREAM_AUTH_FAILED } from '../errors.ts'
import type { Telemetry } from '../telemetry/telemetry.ts'
import type { AccessToken } from './access-token.ts'
import type { UpstreamLog } from './log.ts'
import type { MintedToken } from './token-endpoint.ts'
import type { Claim } from '../redis/owner-lock.ts'
import type { TokenStore } from './token-store.ts'

/** What /readyz reports: no token yet, one held, an exchange under way, or the identity provider failing. */
export type TokenState = 'none' | 'held' | 'renewing' | 'failing'

export interface TokenManagerOptions {
  endpoint: { exchange: () => Promise<MintedToken> }
  /** With Redis: the token shared by every instance. Without: this instance's own. */
  store?: TokenStore
  telemetry: Telemetry
  log: UpstreamLog
  /** How long an instance waits for another instance's exchange before giving up on it. */
  lockWaitMs: number
  now?: () => number
  random?: () => number
}

/** Renew this long before the announced expiry (at most 20% of the life of a short-lived token). */
const REFRESH_SKEW_MS = 30_000
/** Stop sending a token this long before expiry (at most 10% of its life): a call must arrive before it dies. */
const EXPIRY_MARGIN_MS = 5_000
/**
 * Back-off after a failed exchange: doubles from the base up to the cap, with jitter. Never under 1 s
 * (a failing provider gets at most one exchange a second) nor over 5 s (callers recover soon after it does).
 */
const RETRY_BASE_MS = 2_000
const RETRY_CAP_MS = 5_000

/**
 * Holds the client-credentials token. One exchange per lifetime: a token past `renewalDue` is still
 * handed out while one renewal runs in the background, so callers wait only when there is no usable
 * token at all. One exchange at a time, however many callers ask (they share one promise), and with a
 * store, one across instances (a Redis lock; the others are woken by its release). After a failed exchange
 * callers get UPSTREAM_AUTH_FAILED at once until the back-off ends, instead of one exchange each.
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
  #renewal: Promise<AccessToken> | undefined
  #failures = 0
  #retryAt = 0

  constructor (options: TokenManagerOptions) {
    this.#endpoint = options.endpoint
    this.#store = options.store
    this.#telemetry = options.telemetry
    this.#log = options.log
    this.#lockWaitMs = options.lockWaitMs
    this.#now = options.now ?? Date.now
    this.#random = options.random ?? Math.random
  }

  /** `failing` only while no usable token is held: with one, calls still succeed until it is due. */
  get state (): TokenState {
    if (this.#renewal !== undefined) return 'renewing'
    if (this.#usable(this.#current)) return 'held'
    return this.#failures > 0 ? 'failing' : 'none'
  }

  async getToken (): Promise<AccessToken> {
    const current = this.#current
    if (current !== undefined && this.#usable(current)) {
      if (this.#now() >= renewalDue(current)) this.#renewInBackground()
      return current
    }
    return await this.#renew()
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
    if (this.#renewal !== undefined || this.#now() < this.#retryAt) return
    // A failure is logged and counted where it happens; the current token serves while it is usable.
    this.#renew().catch(() => {})
  }

  async #renew (): Promise<AccessToken> {
    if (this.#renewal !== undefined) return await this.#renewal
    const waitMs = this.#retryAt - this.#now()
    if (waitMs > 0) throw backingOff(waitMs)
    this.#renewal = this.#obtain()
      .then((token) => {
        this.#current = token
        this.#failures = 0
        this.#retryAt = 0
        return token
      })
      .finally(() => { this.#renewal = undefined })
    return await this.#renewal
  }

  async #obtain (): Promise<AccessToken> {
    const store = this.#store
    if (store === undefined) return await this.#mint()
    const deadline = this.#now() + this.#lockWaitMs
    for (;;) {
      const shared = await this.#fromStore(store)
      if (shared !== undefined) return shared
      const claim = await store.claim()
      if (claim.owner) return await this.#mintAsOwner(store, claim)
      if (this.#now() >= deadline) throw new UPSTREAM_AUTH_FAILED('another instance is still exchanging credentials')
      await claim.settled
    }
  }

  async #mintAsOwner (store: TokenStore, claim: Claim & { owner: true }): Promise<AccessToken> {
    try {
      // The previous owner may have finished between our look and our lock.
      const shared = await this.#fromStore(store)
      if (shared !== undefined) return shared
      const token = await this.#mint()
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
      throw backingOff(failingMs)
    }
    return undefined
  }

  async #mint (): Promise<AccessToken> {
    const issuedAt = this.#now()
    try {
      const { value, lifetimeMs } = await this.#endpoint.exchange()
      this.#telemetry.tokenExchange('minted')
      this.#log.info({ lifetimeSeconds: lifetimeMs / 1000 }, 'upstream token minted')
      return { value, issuedAt, expiresAt: issuedAt + lifetimeMs }
    } catch (error) {
      this.#failures++
      const delayMs = retryDelay(this.#failures, this.#random())
      this.#retryAt = this.#now() + delayMs
      this.#telemetry.tokenExchange('failed')
      this.#log.warn({ err: error, attempt: this.#failures, retryInMs: delayMs }, 'token exchange failed')
      await this.#store?.markFailing(delayMs)
      throw error
    }
  }
}

/** When to renew: REFRESH_SKEW_MS before expiry, or at 80% of the life of a short-lived token. */
function renewalDue (token: AccessToken): number {
  return token.expiresAt - Math.min(REFRESH_SKEW_MS, (token.expiresAt - token.issuedAt) * 0.2)
}

/** The last moment a token is sent: EXPIRY_MARGIN_MS before expiry, or at 90% of a short life. */
function usableUntil (token: AccessToken): number {
  return token.expiresAt - Math.min(EXPIRY_MARGIN_MS, (token.expiresAt - token.issuedAt) * 0.1)
}

/** Exponential back-off with "equal jitter": half the step fixed, half random, so instances spread out. */
export function retryDelay (attempt: number, random: number): number {
  const step = Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** (attempt - 1))
  return Math.round(step / 2 + random * step / 2)
}

function backingOff (waitMs: number): Error {
  return new UPSTREAM_AUTH_FAILED(`the identity provider is failing; next attempt in ${Math.ceil(waitMs / 1000)} s`)
}
