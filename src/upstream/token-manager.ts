import type { Dispatcher } from 'undici'
import { UPSTREAM_AUTH_FAILED } from '../errors.js'

export interface AccessToken {
  value: string
  issuedAt: number
  expiresAt: number
}

export interface TokenManagerOptions {
  /** Dispatcher bound to the identity provider's origin. */
  dispatcher: Dispatcher
  /** Path of the token endpoint on that origin, e.g. `/oauth/token`. */
  tokenPath: string
  clientId: string
  clientSecret: string
  audience: string
  defaultTtlSeconds: number
  timeoutMs: number
  now?: () => number
}

/** Renew this long before the announced expiry, so an in-flight call never carries a dying token. */
export const REFRESH_SKEW_MS = 30_000

/**
 * Holds the client-credentials token: one exchange per lifetime, and one exchange at a time however many
 * callers ask at once (they all share the same promise).
 */
export class TokenManager {
  readonly #options: TokenManagerOptions
  readonly #now: () => number
  #current: AccessToken | undefined
  #exchange: Promise<AccessToken> | undefined

  constructor (options: TokenManagerOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
  }

  async getToken (): Promise<AccessToken> {
    const current = this.#current
    if (current !== undefined && this.#now() < renewalDue(current)) return current
    return await this.#renew()
  }

  /** Forget `token` after the upstream refused it, unless a newer one has replaced it already. */
  invalidate (token: AccessToken): void {
    if (this.#current === token) this.#current = undefined
  }

  async #renew (): Promise<AccessToken> {
    this.#exchange ??= this.#exchangeCredentials().finally(() => { this.#exchange = undefined })
    return await this.#exchange
  }

  async #exchangeCredentials (): Promise<AccessToken> {
    const { dispatcher, tokenPath, clientId, clientSecret, audience, defaultTtlSeconds, timeoutMs } = this.#options
    const issuedAt = this.#now()
    let answer: unknown
    try {
      const response = await dispatcher.request({
        method: 'POST',
        path: tokenPath,
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ client_id: clientId, client_secret: clientSecret, audience, grant_type: 'client_credentials' }),
        signal: AbortSignal.timeout(timeoutMs)
      })
      if (response.statusCode !== 200) {
        await response.body.dump()
        throw new UPSTREAM_AUTH_FAILED(`the identity provider answered ${response.statusCode}`)
      }
      answer = await response.body.json()
    } catch (error) {
      if (error instanceof UPSTREAM_AUTH_FAILED) throw error
      throw new UPSTREAM_AUTH_FAILED('the identity provider could not be reached or answered no JSON', { cause: error })
    }
    const { access_token: value, expires_in: expiresIn } = (answer ?? {}) as Record<string, unknown>
    if (typeof value !== 'string' || value === '') throw new UPSTREAM_AUTH_FAILED('the identity provider answered without access_token')
    const ttlSeconds = typeof expiresIn === 'number' && expiresIn > 0 ? expiresIn : defaultTtlSeconds
    const token = { value, issuedAt, expiresAt: issuedAt + ttlSeconds * 1000 }
    this.#current = token
    return token
  }
}

/** When to renew: REFRESH_SKEW_MS before expiry, or at 80% of the life of a short-lived token. */
export function renewalDue (token: AccessToken): number {
  const lifetime = token.expiresAt - token.issuedAt
  return token.expiresAt - Math.min(REFRESH_SKEW_MS, lifetime * 0.2)
}
