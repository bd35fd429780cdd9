import type { Dispatcher } from 'undici'
import { withDeadline } from '../cancellation.ts'
import { UPSTREAM_AUTH_FAILED } from '../errors.ts'
import { isTimeout } from './transport-errors.ts'
import { retryAfterSeconds } from './retry-after.ts'

/** The longest lifetime believed: a token announced for longer (1e16 s) would have no expiry Redis takes (`PX 1e+23`), nor be shared. */
const MAX_TOKEN_LIFETIME_SECONDS = 365 * 86_400

/** A token as the identity provider handed it out. */
export interface MintedToken {
  value: string
  lifetimeMs: number
}

export interface TokenEndpointOptions {
  /** A new connection to the identity provider's origin, one per exchange (closed after it). */
  connection: () => Dispatcher
  /** Path of the token endpoint on that origin, e.g. `/oauth/token`. */
  tokenPath: string
  clientId: string
  clientSecret: string
  audience: string
  defaultTtlSeconds: number
  timeoutMs: number
}

/**
 * One client-credentials exchange with the identity provider. Every way it can fail (unreachable, slow,
 * a non-200, no JSON, no `access_token`) is UPSTREAM_AUTH_FAILED, with a message that never holds the
 * secret or what the provider answered. Each exchange has a connection of its own: one comes per token lifetime, so
 * keeping connections buys nothing, and one kept from a hung provider may be dead when it answers again (a pool
 * reconnects ahead of its next request: the 200 then waited a deadline and a back-off more).
 */
export class TokenEndpoint {
  readonly #options: TokenEndpointOptions

  constructor (options: TokenEndpointOptions) {
    this.#options = options
  }

  /** `signal` aborts an exchange given up on before its own timeout. */
  async exchange (signal?: AbortSignal): Promise<MintedToken> {
    const { defaultTtlSeconds } = this.#options
    const { access_token: value, expires_in: expiresIn } = await this.#request(signal)
    if (typeof value !== 'string' || value === '') throw new UPSTREAM_AUTH_FAILED('the identity provider answered without access_token')
    // RFC 6749's access token is visible ASCII: one with a control or non-ASCII character could never be sent in a
    // header, and every call would fail while the token looked held.
    if (!/^[\x20-\x7e]+$/.test(value)) throw new UPSTREAM_AUTH_FAILED('the identity provider answered an access_token no header can carry')
    const seconds = Number(expiresIn)
    // A missing, zero or unreadable lifetime means the configured default rather than a token renewed on every call.
    const ttlSeconds = expiresIn !== undefined && expiresIn !== null && Number.isFinite(seconds) && seconds > 0 ? seconds : defaultTtlSeconds
    return { value, lifetimeMs: Math.round(Math.min(ttlSeconds, MAX_TOKEN_LIFETIME_SECONDS) * 1000) }
  }

  async #request (signal: AbortSignal | undefined): Promise<Record<string, unknown>> {
    const { connection, tokenPath, clientId, clientSecret, audience, timeoutMs } = this.#options
    let answer: unknown
    const deadline = withDeadline(signal, timeoutMs)
    const dispatcher = connection()
    try {
      const response = await dispatcher.request({
        method: 'POST',
        path: tokenPath,
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ client_id: clientId, client_secret: clientSecret, audience, grant_type: 'client_credentials' }),
        signal: deadline.signal
      })
      if (response.statusCode !== 200) {
        await response.body.dump()
        const failed = new UPSTREAM_AUTH_FAILED(`the identity provider answered ${response.statusCode}`)
        // A provider asking to slow down is heeded: the back-off lasts what it asks at least, for the deployment.
        const seconds = response.statusCode === 429 || response.statusCode === 503 ? retryAfterSeconds(response.headers) : undefined
        throw seconds === undefined ? failed : Object.assign(failed, { askedToWaitMs: seconds * 1000 })
      }
      answer = jsonOf(await response.body.text())
    } catch (error) {
      if (error instanceof UPSTREAM_AUTH_FAILED) throw error
      const why = isTimeout(error)
        ? `the identity provider did not answer within ${timeoutMs} ms`
        : 'the identity provider could not be reached'
      throw new UPSTREAM_AUTH_FAILED(why, { cause: error })
    } finally {
      deadline.clear()
      dispatcher.destroy().catch(() => {})
    }
    if (answer === undefined) throw new UPSTREAM_AUTH_FAILED('the identity provider answered no JSON')
    return typeof answer === 'object' && answer !== null ? answer as Record<string, unknown> : {}
  }
}

/** How long the identity provider asked to be left alone after the exchange that failed with `error` (0: it did not say). */
export function askedToWaitMs (error: unknown): number {
  const asked = (error as { askedToWaitMs?: unknown } | null)?.askedToWaitMs
  return typeof asked === 'number' ? asked : 0
}

/** The body's JSON, or undefined: without the parser's error, which quotes the body (the token itself, maybe). */
function jsonOf (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
