import type { Telemetry } from '../telemetry/telemetry.ts'
import type { RedisBus } from '../redis/bus.ts'
import type { SharedWindow } from '../redis/shared-window.ts'
import { steadyNow } from '../steady-clock.ts'

/** With Redis: the key every instance's window is kept in (never shortened), and the bus its openings are told on. */
export interface SharedBackoff {
  window: Pick<SharedWindow, 'remainingMs' | 'extend'>
  bus: Pick<RedisBus, 'ready' | 'listenWindows' | 'listenReady' | 'publishWindow'>
  /** The window's key, which names it on the bus too. */
  name: string
  onError: (error: unknown) => void
}

export interface BackoffWindowOptions {
  /** With Redis: the window every instance sees. Without: this instance's only. */
  shared?: SharedBackoff
  telemetry: Pick<Telemetry, 'backoff'>
  now?: () => number
}

/**
 * The time during which the upstream asked us (429, or 503 with Retry-After) not to call. Each instance keeps
 * the window's end; with Redis, the instance that opens it extends the shared key and tells the others on the bus,
 * and each reads the key (one PTTL) only when its bus is ready again, since it may have missed events meanwhile:
 * one instance's 429 silences all of them without a Redis command per call.
 */
export class BackoffWindow {
  readonly #shared: SharedBackoff | undefined
  readonly #telemetry: BackoffWindowOptions['telemetry']
  readonly #now: () => number
  #until = 0
  #active = false

  constructor (options: BackoffWindowOptions) {
    this.#shared = options.shared
    this.#telemetry = options.telemetry
    this.#now = options.now ?? steadyNow
    if (this.#shared !== undefined) this.#follow(this.#shared)
  }

  /** What remains of the window, as this instance knows it (for the refusal known before a call is queued). */
  get remainingMs (): number {
    return Math.max(0, this.#until - this.#now())
  }

  /** What remains of the window, reported when it has just closed: 0 means the upstream may be called. */
  check (): number {
    this.#report()
    return this.remainingMs
  }

  async open (ms: number): Promise<void> {
    this.#extendHere(ms)
    const shared = this.#shared
    if (shared === undefined) return
    await shared.window.extend(ms)
    await shared.bus.publishWindow({ name: shared.name, ms }).catch(shared.onError)
  }

  /** Every instance's openings as the bus tells them, and what the key holds whenever the bus is ready again. */
  #follow ({ window, bus, name, onError }: SharedBackoff): void {
    const read = (): void => { window.remainingMs().then((ms) => { this.#extendHere(ms) }, onError) }
    bus.listenWindows((event) => { if (event.name === name) this.#extendHere(event.ms) })
    bus.listenReady(read)
    if (bus.ready) read()
  }

  #extendHere (ms: number): void {
    this.#until = Math.max(this.#until, this.#now() + ms)
    this.#report()
  }

  #report (): void {
    const active = this.remainingMs > 0
    if (active !== this.#active) {
      this.#active = active
      this.#telemetry.backoff(active)
    }
  }
}
