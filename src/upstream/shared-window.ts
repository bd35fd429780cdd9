import type { UpstreamLog } from './log.js'
import type { SharedRedis } from './shared-redis.js'

/** Sets the window only when it would end later than the one already there: a window is never shortened. */
const EXTEND = `local left = redis.call('pttl', KEYS[1])
if left < tonumber(ARGV[1]) then redis.call('set', KEYS[1], '1', 'PX', ARGV[1]) end
return 1`

/**
 * A time window every instance on one Redis sees: one key whose TTL is what remains of it. Times are
 * Redis's, so clocks of the instances need not agree. A Redis failure reads as "no window" (each
 * instance then keeps only its own): Redis being down must never stop the service.
 */
export class SharedWindow {
  readonly #redis: SharedRedis
  readonly #key: string
  readonly #log: UpstreamLog

  constructor (redis: SharedRedis, key: string, log: UpstreamLog) {
    this.#redis = redis
    this.#key = key
    this.#log = log
  }

  async remainingMs (): Promise<number> {
    try {
      return Math.max(0, await this.#redis.pttl(this.#key))
    } catch (err) {
      this.#log.debug({ err, key: this.#key }, 'shared window unreadable; using the local one')
      return 0
    }
  }

  async extend (ms: number): Promise<void> {
    try {
      await this.#redis.eval(EXTEND, 1, this.#key, Math.ceil(ms))
    } catch (err) {
      this.#log.debug({ err, key: this.#key }, 'shared window not written; it stays local')
    }
  }
}
