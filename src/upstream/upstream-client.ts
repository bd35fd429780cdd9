import { errors as undiciErrors, type Dispatcher } from 'undici'
import {
  UPSTREAM_AUTH_FAILED, UPSTREAM_ERROR, UPSTREAM_INVALID_RESPONSE, UPSTREAM_RATE_LIMITED, UPSTREAM_TIMEOUT, withRetryAfter
} from '../errors.js'
import { readUpstreamProfile, readUpstreamTimeline, type ProfileResponse, type TimelineResponse } from '../schemas/profile.js'
import type { AccessToken, TokenManager } from './token-manager.js'

/** What a lookup found: the validated body, or that the upstream has no such member. */
export type UpstreamAnswer<T> = { found: true, body: T } | { found: false }

export interface UpstreamClientOptions {
  /** Dispatcher bound to the upstream's origin. */
  dispatcher: Dispatcher
  /** Path of UPSTREAM_BASE_URL (kept, routes appended), without a trailing slash. */
  basePath: string
  tokens: Pick<TokenManager, 'getToken' | 'invalidate'>
  authScheme: string
  timeoutMs: number
}

/** Upper bound for a Retry-After we honour, so a bogus header cannot silence us for days. */
export const MAX_RETRY_AFTER_SECONDS = 300
const DEFAULT_RETRY_AFTER_SECONDS = 5

/**
 * One typed method per upstream resource. It adds the token, retries once on 401/403 with a new
 * one, validates bodies, and turns every failure into one of the contract's coded errors.
 */
export class UpstreamClient {
  readonly #options: UpstreamClientOptions

  constructor (options: UpstreamClientOptions) {
    this.#options = options
  }

  async profile (username: string): Promise<UpstreamAnswer<ProfileResponse>> {
    return await this.#get(`/profile/${encodeURIComponent(username)}`, readUpstreamProfile)
  }

  async timeline (username: string): Promise<UpstreamAnswer<TimelineResponse>> {
    return await this.#get(`/profile/${encodeURIComponent(username)}/timeline`, readUpstreamTimeline)
  }

  async #get<T> (path: string, read: (body: unknown) => T | undefined): Promise<UpstreamAnswer<T>> {
    let token = await this.#options.tokens.getToken()
    let response = await this.#send(path, token)
    if (isAuthRefusal(response.statusCode)) {
      await response.body.dump()
      this.#options.tokens.invalidate(token)
      token = await this.#options.tokens.getToken()
      response = await this.#send(path, token)
      if (isAuthRefusal(response.statusCode)) {
        await response.body.dump()
        throw new UPSTREAM_AUTH_FAILED(`the profile service refused a fresh token (${response.statusCode})`)
      }
    }

    const { statusCode, headers, body } = response
    if (statusCode === 404) {
      await body.dump()
      return { found: false }
    }
    if (statusCode === 429) {
      await body.dump()
      const seconds = retryAfterSeconds(headers['retry-after'])
      throw withRetryAfter(new UPSTREAM_RATE_LIMITED(seconds), seconds)
    }
    if (statusCode !== 200) {
      await body.dump()
      throw new UPSTREAM_ERROR(`status ${statusCode}`)
    }
    let parsed: unknown
    try {
      parsed = await body.json()
    } catch (error) {
      throw this.#translate(error, UPSTREAM_INVALID_RESPONSE)
    }
    const valid = read(parsed)
    if (valid === undefined) throw new UPSTREAM_INVALID_RESPONSE()
    return { found: true, body: valid }
  }

  async #send (path: string, token: AccessToken): Promise<Dispatcher.ResponseData> {
    const { dispatcher, basePath, authScheme, timeoutMs } = this.#options
    try {
      return await dispatcher.request({
        method: 'GET',
        path: basePath + path,
        headers: {
          authorization: authScheme === '' ? token.value : `${authScheme} ${token.value}`,
          'content-type': 'application/json',
          accept: 'application/json'
        },
        signal: AbortSignal.timeout(timeoutMs)
      })
    } catch (error) {
      throw this.#translate(error, UPSTREAM_ERROR)
    }
  }

  /** Maps transport failures to coded errors; `fallback` covers everything that is not a timeout. */
  #translate (error: unknown, fallback: typeof UPSTREAM_ERROR | typeof UPSTREAM_INVALID_RESPONSE): Error {
    if (isTimeout(error)) return new UPSTREAM_TIMEOUT(this.#options.timeoutMs, { cause: error })
    if (fallback === UPSTREAM_INVALID_RESPONSE) return new UPSTREAM_INVALID_RESPONSE({ cause: error })
    return new UPSTREAM_ERROR('it could not be reached', { cause: error })
  }
}

function isAuthRefusal (status: number): boolean {
  return status === 401 || status === 403
}

function isTimeout (error: unknown): boolean {
  return error instanceof undiciErrors.HeadersTimeoutError ||
    error instanceof undiciErrors.BodyTimeoutError ||
    error instanceof undiciErrors.ConnectTimeoutError ||
    (error instanceof DOMException && error.name === 'TimeoutError')
}

/** Retry-After in seconds or as an HTTP date, capped; a missing or unreadable one means a short pause. */
export function retryAfterSeconds (header: string | string[] | undefined, now = Date.now()): number {
  const value = Array.isArray(header) ? header[0] : header
  if (value === undefined) return DEFAULT_RETRY_AFTER_SECONDS
  const seconds = /^\d+$/.test(value.trim()) ? Number(value) : (Date.parse(value) - now) / 1000
  if (!Number.isFinite(seconds)) return DEFAULT_RETRY_AFTER_SECONDS
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(seconds)))
}
