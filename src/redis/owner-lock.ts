import { randomUUID } from 'node:crypto'
import type { BusEvent, RedisBus } from './bus.ts'
import type { RedisCommands } from './commands.ts'
import { mayHaveRun, type RedisHealth } from './health.ts'

/**
 * Who does a job: this instance (then it must `release`, which never rejects; `lock`, absent when the job runs
 * without one, lets a script release it with its own work), or another one (then wait for `settled`,
 * which resolves with the `traceparent` of the owner's span when the message that ended the wait carried one).
 */
export type Claim =
  | { owner: true, lock?: HeldLock, release: () => Promise<void> }
  | { owner: false, settled: Promise<string | undefined> }

/**
 * A lock this instance holds, for a script that releases it along with its own work (one round trip): such a script
 * deletes `key` only while it holds `token`, publishes the release, then calls `released` (no renewal, no second release).
 */
export interface HeldLock {
  key: string
  token: string
  released: () => void
}

/**
 * Sends the claim of `lockKey` (SET NX PX `ttlMs` of `token`, alone or within a script) and answers whether it was
 * taken, or undefined when the script found no claim was needed.
 */
export type SendClaim = (lockKey: string, token: string, ttlMs: number) => Promise<boolean | undefined>

export interface OwnerLockOptions {
  redis: Pick<RedisCommands, 'set' | 'eval'>
  health: Pick<RedisHealth, 'up' | 'run' | 'listen'>
  bus: Pick<RedisBus, 'listen' | 'publish'>
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
 * owner token, renewed while the job runs. The others are woken by the owner's release on the bus,
 * or look again after the lock's lifetime (all they can do while the bus is down).
 */
export class OwnerLock {
  readonly #options: OwnerLockOptions
  readonly ttlMs: number
  readonly #waiters = new Map<string, Set<(ownerSpan?: string) => void>>()
  /**
   * Locks that may be left in Redis with nobody to renew or release them (key by token), which would hold other
   * instances' jobs for a lifetime: claims sent but never answered (a hung Redis runs them when it resumes), and
   * releases that failed (a renewal sent before may still run). Released as soon as Redis answers again.
   */
  readonly #unreleased = new Map<string, string>()

  constructor (options: OwnerLockOptions) {
    this.#options = options
    this.ttlMs = options.ttlMs
    // A release missed (the bus down or flapping) costs a waiter one lifetime: it looks again then, as on a lock left by a crash.
    options.bus.listen((event) => { this.#onEvent(event) })
    options.health.listen((up) => { if (up) this.#releaseLeftBehind() })
  }

  /** Undefined when instances cannot coordinate right now (Redis is down): the caller then goes alone. Without the bus, still one job. */
  async claim (key: string): Promise<Claim | undefined> {
    const { redis, health } = this.#options
    if (!health.up) return undefined
    try {
      return await this.claimBy(key, async (lock, token, ttlMs) => await health.run(async () => await redis.set(lock, token, 'PX', ttlMs, 'NX')) === 'OK')
    } catch (error) {
      this.#options.onError(error)
      return undefined
    }
  }

  /** The claim `send` makes (a script may claim along with a read, in one round trip), if it made one; rejects as `send` does. */
  async claimBy (key: string, send: SendClaim): Promise<Claim | undefined> {
    const { ttlMs } = this
    // Wait before trying: a release between a failed attempt and the wait would otherwise be missed.
    const waiting = this.#wait(key)
    // Made for every claiming read: randomUUID draws on Node's buffered entropy, randomBytes on OpenSSL (tens of µs when cold).
    const token = randomUUID()
    let acquired: boolean | undefined
    try {
      acquired = await send(lockKey(key), token, ttlMs)
    } catch (error) {
      waiting.cancel()
      if (mayHaveRun(error)) this.#unreleased.set(token, key)
      throw error
    }
    if (acquired === undefined) {
      waiting.cancel()
      return undefined
    }
    if (!acquired) return { owner: false, settled: waiting.settled }
    waiting.cancel()
    const renewal = setInterval(() => { this.#renew(key, token, renewal) }, ttlMs / 3).unref()
    let held = true
    const stopRenewing = (): void => {
      held = false
      clearInterval(renewal)
    }
    return {
      owner: true,
      // This instance's own waiters hear of its release here: the bus drops an instance's own messages.
      lock: { key: lockKey(key), token, released: () => { stopRenewing(); this.#wake(key) } },
      release: async () => {
        if (!held) return
        stopRenewing()
        await this.#release(key, token)
      }
    }
  }

  #renew (key: string, token: string, renewal: NodeJS.Timeout): void {
    const { redis, health } = this.#options
    const { ttlMs } = this
    health.run(async () => await redis.eval(RENEW, 1, lockKey(key), token, ttlMs)).then(
      // Another holds it now (it expired): a waiter may start its own job, which is all a lost lock costs.
      (renewed) => { if (renewed !== 1) clearInterval(renewal) },
      // Tried again at the next tick: a flap of Redis shorter than the lock's life keeps the lock.
      (error: unknown) => { this.#options.onError(error) }
    )
  }

  /**
   * Deletes the locks left behind, now and a third of a lifetime later: Redis may still be running what the hung
   * connection had sent (a claim among it would land after the first release).
   */
  #releaseLeftBehind (): void {
    if (this.#unreleased.size === 0) return
    const left = [...this.#unreleased]
    this.#unreleased.clear()
    const release = (): void => { for (const [token, key] of left) this.#release(key, token).catch(() => {}) }
    release()
    setTimeout(release, this.ttlMs / 3).unref()
  }

  /**
   * Deletes the lock if it still carries `token`, then wakes its waiters, here (the bus drops an instance's own
   * messages) and elsewhere; a claim that never ran, or a lock that expired, leaves nothing to wake. Never rejects: a
   * release that fails is made again once Redis answers, and until then the lock expires on its own.
   */
  async #release (key: string, token: string): Promise<void> {
    const { redis, health, bus, onError } = this.#options
    try {
      if (await health.run(async () => await redis.eval(RELEASE, 1, lockKey(key), token)) !== 1) return
      this.#wake(key)
      await bus.publish({ type: 'released', key })
    } catch (error) {
      this.#unreleased.set(token, key)
      onError(error)
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
