import type { Telemetry } from '../telemetry/telemetry.ts'
import type { SharedWindow } from '../redis/shared-window.ts'

export interface BackoffWindowOptions {
  /** With Redis: the window every instance sees. Without: this instance's only. */
  shared?: Pick<SharedWindow, 'remainingMs' | 'extend'>
  telemetry: Pick<Telemetry, 'backoff'>
  now?: () => number
}

/**
 * The time during which the upstream asked us (429, or 503 with Retry-After) not to call. Each
 * instance keeps its own end time and, with Redis, asks the shared window before every call, so one
 * instance's 429 silences all of them.
 */
export class BackoffWindow {
  readonly #shared: BackoffWindowOptions['shared']
  readonly #telemetry: BackoffWindowOptions['telemetry']
  readonly #now: () => number
  #until = 0
  #active = false

  constructor (options: BackoffWindowOptions) {
    this.#shared = options.shared
    this.#telemetry = options.telemetry
    this.#now = options.now ?? Date.now
  }

  /** What this instance knows without asking Redis (for /readyz and the fast refusal before queueing). */
  get remainingMs (): number {
    return Math.max(0, this.#until - this.#now())
  }

  /** What remains of the window, the shared one included: 0 means the upstream may be called. */
  async check (): Promise<number> {
    const sharedMs = this.#shared === undefined ? 0 : await this.#shared.remainingMs()
    this.#until = Math.max(this.#until, this.#now() + sharedMs)
    this.#report()
    return this.remainingMs
  }

  async open (ms: number): Promise<void> {
    this.#until = Math.max(this.#until, this.#now() + ms)
    this.#report()
    await this.#shared?.extend(ms)
  }

  #report (): void {
    const active = this.remainingMs > 0
    if (active !== this.#active) {
      this.#active = active
      this.#telemetry.backoff(active)
    }
  }
}
