import type { Dispatcher } from 'undici'
import { untilAborted } from '../../cancellation.ts'
import { EdgeFailure } from '../edge-errors.ts'
import type { AccessToken } from '../access-token.ts'
import type { RecentLatency } from '../recent-latency.ts'
import type { TokenManager } from '../token-manager.ts'
import { callOf, fail, Forward, sendBy, signalOf, type Controller, type Dispatch, type Headers, type Interceptor } from './edge-call.ts'

export interface TokenOptions {
  tokens: Pick<TokenManager, 'getToken' | 'invalidate'>
  /** Prefix of the Authorization value; empty: the bare token. */
  authScheme: string
  /** What the upstream has been taking: a refused call is sent again only while its caller's time covers that. */
  latency: Pick<RecentLatency, 'expectedMs'>
  now: () => number
}

/**
 * The client-credentials token on every call, taken once the call holds a slot, so that a queued call never carries
 * a token replaced while it waited. A 401 or 403 drops that token and the call is sent once more with a renewed one,
 * if its caller's time still covers a call (else it ends `too_late`, as a queued call would); a second refusal ends
 * it as `auth_refused`.
 */
export function token (options: TokenOptions): Interceptor {
  return (dispatch) => (opts, handler) => {
    new Authorized(dispatch, opts, handler, options).send()
    return true
  }
}

class Authorized extends Forward {
  readonly #dispatch: Dispatch
  readonly #opts: Dispatcher.DispatchOptions
  readonly #options: TokenOptions
  #token: AccessToken | undefined
  #renewed = false
  /** Set while the answer is a refusal of the token: its body is dropped. */
  #refusedWith: number | undefined

  constructor (dispatch: Dispatch, opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler, options: TokenOptions) {
    super(handler)
    this.#dispatch = dispatch
    this.#opts = opts
    this.#options = options
  }

  /** Sends the call with the current token (a renewed one after a refusal), once there is one. */
  send (): void {
    const signal = signalOf(this.#opts)
    const pending = this.#options.tokens.getToken()
    const ready = signal === undefined ? pending : untilAborted(pending, signal)
    ready.then(
      (token) => { this.#sendWith(token) },
      (error: unknown) => { fail(this.handler, error) }
    )
  }

  #sendWith (token: AccessToken): void {
    // The renewal took some of the caller's time.
    if (this.#renewed && this.#tooLate()) return fail(this.handler, new EdgeFailure({ kind: 'too_late' }))
    this.#token = token
    const { authScheme } = this.#options
    const authorization = authScheme === '' ? token.value : `${authScheme} ${token.value}`
    this.#dispatch({ ...this.#opts, headers: { ...this.#opts.headers as Record<string, string>, authorization } }, this)
  }

  override onResponseStart (controller: Controller, statusCode: number, headers: Headers, statusMessage?: string): void {
    if (statusCode === 401 || statusCode === 403) this.#refusedWith = statusCode
    else super.onResponseStart(controller, statusCode, headers, statusMessage)
  }

  override onResponseData (controller: Controller, chunk: Buffer): void {
    if (this.#refusedWith === undefined) super.onResponseData(controller, chunk)
  }

  override onResponseEnd (controller: Controller, trailers: Headers): void {
    const status = this.#refusedWith
    if (status === undefined) return super.onResponseEnd(controller, trailers)
    this.#refusedWith = undefined
    // A 401 on the call sent again with a renewed token: the upstream refuses the tokens themselves (a wrong audience).
    if (this.#token !== undefined) this.#options.tokens.invalidate(this.#token, this.#renewed && status === 401)
    if (this.#renewed) return super.onResponseError(controller, new EdgeFailure({ kind: 'auth_refused', status }))
    this.#renewed = true
    if (this.#tooLate()) return super.onResponseError(controller, new EdgeFailure({ kind: 'too_late' }))
    this.send()
  }

  /** Whether the caller's remaining time no longer covers what the upstream has been taking (the call then stays unsent). */
  #tooLate (): boolean {
    return this.#options.now() >= sendBy(callOf(this.#opts), this.#options.latency.expectedMs)
  }
}
