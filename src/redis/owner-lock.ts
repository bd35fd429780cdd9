import { randomBytes } from 'node:crypto'
import type { BusEvent, RedisBus } from './bus.ts'
import type { RedisCommands } from './commands.ts'
import type { RedisHealth } from './health.ts'

/**
 * Who does a job: this instance (then it must `release`, which never rejects), or another one (then wait for `settled`,
 * which resolves with the `traceparent` of the owner's span when the message that ended the wait carried one).
 */
export type Claim =
  | { owner: true, release: () => Promise<void> }
  | { owner: false, settled: Promise<string | undefined> }

export interface OwnerLockOptions {
  redis: Pick<RedisCommands, 'set' | 'eval'>
  health: Pick<RedisHealth, 'run'>
  bus: Pick<RedisBus, 'ready' | 'listen' | 'publish'>
  /** A lock's lifetime (see load-budget.ts); also how long a waiter waits at most before it looks again. */
  ttlMs: number
  onError: (error: unknown) => void
}

/** Deletes the lock only if it still carries our token (it may have expired and gone to another). */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

/** Extends the lock only while it still carries our token. */
const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`

/**
 * One job per key across the instances sharing Redis (a load, a token exchange): a short lock with an
 * owner token, renewed while the job runs. The others are woken by the owner's release on the bus
 * (never by polling), or look again after the lock's lifetime.
 */
export class OwnerLock {
  readonly #options: OwnerLockOptions
  readonly ttlMs: number
  readonly #waiters = new Map<string, Set<(ownerSpan?: string) => void>>()

  constructor (options: OwnerLockOptions) {
    this.#options = options
    this.ttlMs = options.ttlMs
    options.bus.listen({
      onEvent: (event) => this.#onEvent(event),
      // Events may be missed from now on: nobody should wait for one.
      onLost: () => { for (const key of [...this.#waiters.keys()]) this.#wake(key) },
      onReady: () => {}
    })
  }

  /** Undefined when instances cannot coordinate right now (Redis or its bus is down): the caller then goes alone. */
  async claim (key: string): Promise<Claim | undefined> {
    const { redis, health, bus } = this.#options
    const { ttlMs } = this
    if (!bus.ready) return undefined
    // Wait before trying: a release between a failed attempt and the wait would otherwise be missed.
    const waiting = this.#wait(key)
    const token = randomBytes(12).toString('base64url')
    let acquired: boolean
    try {
      acquired = await health.run(async () => await redis.set(lockKey(key), token, 'PX', ttlMs, 'NX')) === 'OK'
    } catch (error) {
      waiting.cancel()
      this.#options.onError(error)
      return undefined
    }
    if (!acquired) return { owner: false, settled: waiting.settled }
    waiting.cancel()
    const renewal = setInterval(() => { this.#renew(key, token, renewal) }, ttlMs / 3).unref()
    return {
      owner: true,
      release: async () => {
        clearInterval(renewal)
        await this.#release(key, token)
      }
    }
  }

  #renew (key: string, token: string, renewal: NodeJS.Timeout): void {
    const { redis, health } = this.#options
    const { ttlMs } = this
    health.run(async () => await redis.eval(RENEW, 1, lockKey(key), token, ttlMs)).then(
      (renewed) => { if (renewed !== 1) clearInterval(renewal) },
      // Not renewed: the lock expires and a waiter may start its own job, which is all a lost lock costs.
      (error: unknown) => { clearInterval(renewal); this.#options.onError(error) }
    )
  }

  async #release (key: string, token: string): Promise<void> {
    const { redis, health, bus } = this.#options
    try {
      await health.run(async () => await redis.eval(RELEASE, 1, lockKey(key), token))
      await bus.publish({ type: 'released', key })
    } catch (error) {
      // The lock expires on its own, and the waiters stop waiting then.
      this.#options.onError(error)
    }
  }

  #wait (key: string): { settled: Promise<string | undefined>, cancel: () => void } {
    let waiters = this.#waiters.get(key)
    if (waiters === undefined) {
      waiters = new Set()
      this.#waiters.set(key, waiters)
    }
    const set = waiters
    let done!: (ownerSpan?: string) => void
    const settled = new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => done(), this.ttlMs)
      timer.unref()
      done = (ownerSpan) => {
        clearTimeout(timer)
        set.delete(done)
        if (set.size === 0 && this.#waiters.get(key) === set) this.#waiters.delete(key)
        resolve(ownerSpan)
      }
    })
    set.add(done)
    return { settled, cancel: done }
  }

  #onEvent (event: BusEvent): void {
    if (event.type !== 'staled') this.#wake(event.key, event.traceparent)
  }

  #wake (key: string, ownerSpan?: string): void {
    const waiters = this.#waiters.get(key)
    if (waiters !== undefined) for (const done of [...waiters]) done(ownerSpan)
  }
}

/** The lock of one key's job: the key's hash tag, so the same shard as what it guards. */
function lockKey (key: string): string {
  return `${key}:lock`
}
