import type { RedisCommands } from './commands.ts'
import type { RedisHealth } from './health.ts'

/** Sets the window only when it would end later than the one already there: a window is never shortened. */
const EXTEND = `local left = redis.call('pttl', KEYS[1])
if left < tonumber(ARGV[1]) then redis.call('set', KEYS[1], '1', 'PX', ARGV[1]) end
return 1`

const END = "return redis.call('del', KEYS[1])"

export interface SharedWindowOptions {
  redis: Pick<RedisCommands, 'eval' | 'pttl'>
  health: Pick<RedisHealth, 'run'>
  key: string
  onError: (error: unknown) => void
}

/**
 * A time window every instance on one Redis sees: one key whose TTL is what remains of it. Times are
 * Redis's, so clocks of the instances need not agree. While Redis is down it reads as "no window" at
 * once (each instance then keeps only its own): Redis being down must never stop the service.
 */
export class SharedWindow {
  readonly #options: SharedWindowOptions

  constructor (options: SharedWindowOptions) {
    this.#options = options
  }

  async remainingMs (): Promise<number> {
    const { redis, health, key } = this.#options
    try {
      return Math.max(0, await health.run(async () => await redis.pttl(key)))
    } catch (error) {
      this.#options.onError(error)
      return 0
    }
  }

  async extend (ms: number): Promise<void> {
    const { redis, health, key } = this.#options
    try {
      await health.run(async () => await redis.eval(EXTEND, 1, key, Math.ceil(ms)))
    } catch (error) {
      this.#options.onError(error)
    }
  }

  /** Ends the window at once, whatever remains of it: what it stood for is over (a failing provider answered). */
  async end (): Promise<void> {
    const { redis, health, key } = this.#options
    try {
      await health.run(async () => await redis.eval(END, 1, key))
    } catch (error) {
      this.#options.onError(error)
    }
  }
}
