import { randomBytes } from 'node:crypto'
import type { RedisCommander } from 'ioredis'
import { lockKey } from './keys.js'
import type { CacheEvent, RedisEvents } from './redis-events.js'

/** The commands used here, which a single Redis and a Cluster both have. */
export type LockRedis = Pick<RedisCommander, 'set' | 'eval'> & { status: string }

/** Who loads a key: this instance (then it must `release`, which never rejects), or another one (then wait for `settled`). */
export type Claim =
  | { owner: true, release: () => Promise<void> }
  | { owner: false, settled: Promise<void> }

export interface RedisCoalescerOptions {
  redis: LockRedis
  events: Pick<RedisEvents, 'ready' | 'listen' | 'publish'>
  /** How long a lock outlives a crashed owner; also how long the others wait for it at most. */
  lockTtlMs: number
  onError: (error: unknown) => void
}

/** Deletes the lock only if it still carries our token (it may have expired and gone to another). */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

/**
 * One load per key across the instances sharing Redis: a short lock with an owner token. The others
 * are woken by the owner's release on the events channel (never by polling), or give up after the
 * lock's lifetime, and then read what the owner stored or load themselves.
 */
export class RedisCoalescer {
  readonly #options: RedisCoalescerOptions
  readonly #waiters = new Map<string, Set<() => void>>()

  constructor (options: RedisCoalescerOptions) {
    this.#options = options
    options.events.listen({
      onEvent: (event) => this.#onEvent(event),
      // Events may be missed from now on: nobody should wait for one.
      onLost: () => { for (const key of [...this.#waiters.keys()]) this.#wake(key) }
    })
  }

  /**
   * Undefined when instances cannot coordinate right now (Redis or its events are down): the caller
   * then loads on its own.
   */
  async claim (key: string): Promise<Claim | undefined> {
    const { redis, events, lockTtlMs } = this.#options
    if (redis.status !== 'ready' || !events.ready) return undefined
    // Wait before trying: a release between a failed attempt and the wait would otherwise be missed.
    const waiting = this.#wait(key)
    const token = randomBytes(12).toString('base64url')
    let acquired: boolean
    try {
      acquired = await redis.set(lockKey(key), token, 'PX', lockTtlMs, 'NX') === 'OK'
    } catch (error) {
      waiting.cancel()
      this.#options.onError(error)
      return undefined
    }
    if (!acquired) return { owner: false, settled: waiting.settled }
    waiting.cancel()
    return { owner: true, release: async () => await this.#release(key, token) }
  }

  async #release (key: string, token: string): Promise<void> {
    try {
      await this.#options.redis.eval(RELEASE, 1, lockKey(key), token)
      await this.#options.events.publish({ type: 'released', key })
    } catch (error) {
      // The lock expires on its own, and the waiters stop waiting then.
      this.#options.onError(error)
    }
  }

  #wait (key: string): { settled: Promise<void>, cancel: () => void } {
    let waiters = this.#waiters.get(key)
    if (waiters === undefined) {
      waiters = new Set()
      this.#waiters.set(key, waiters)
    }
    const set = waiters
    let done!: () => void
    const settled = new Promise<void>((resolve) => {
      const timer = setTimeout(() => done(), this.#options.lockTtlMs)
      timer.unref()
      done = () => {
        clearTimeout(timer)
        set.delete(done)
        if (set.size === 0 && this.#waiters.get(key) === set) this.#waiters.delete(key)
        resolve()
      }
    })
    set.add(done)
    return { settled, cancel: done }
  }

  #onEvent (event: CacheEvent): void {
    if (event.type !== 'staled') this.#wake(event.key)
  }

  #wake (key: string): void {
    const waiters = this.#waiters.get(key)
    if (waiters !== undefined) for (const done of [...waiters]) done()
  }
}
