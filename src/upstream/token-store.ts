import { randomUUID } from 'node:crypto'
import type { UpstreamLog } from './log.js'
import type { SharedRedis } from './shared-redis.js'
import { SharedWindow } from './shared-window.js'
import type { TokenCipher } from './token-cipher.js'
import type { AccessToken } from './token-manager.js'

/**
 * Where instances on one Redis share the token: the sealed token itself, a lock naming the one instance
 * exchanging credentials, and a window during which the identity provider is known to be failing.
 */
export interface TokenStore {
  read: () => Promise<AccessToken | undefined>
  write: (token: AccessToken) => Promise<void>
  /** An owner id when this caller now holds the exchange lock, undefined when another instance does. */
  tryLock: () => Promise<string | undefined>
  unlock: (owner: string) => Promise<void>
  failingForMs: () => Promise<number>
  markFailing: (ms: number) => Promise<void>
}

export interface RedisTokenStoreOptions {
  redis: SharedRedis
  cipher: TokenCipher
  keyPrefix: string
  /** The lock expires on its own after this, so a crashed owner cannot stall the others for longer. */
  lockTtlMs: number
  log: UpstreamLog
  now?: () => number
}

/** The sealed value and what remains of its life, in one round trip (Redis's clock, not ours). */
const READ = "return { redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1]) }"
/** Only the owner releases the lock: after its TTL another instance may hold it. */
const UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

/**
 * The token store on Redis. Every failure of Redis fails open (no shared token, the lock granted, no
 * shared failure): an instance cut off from Redis exchanges for itself rather than stopping.
 */
export class RedisTokenStore implements TokenStore {
  readonly #redis: SharedRedis
  readonly #cipher: TokenCipher
  readonly #tokenKey: string
  readonly #lockKey: string
  readonly #failing: SharedWindow
  readonly #lockTtlMs: number
  readonly #log: UpstreamLog
  readonly #now: () => number

  constructor (options: RedisTokenStoreOptions) {
    this.#redis = options.redis
    this.#cipher = options.cipher
    this.#tokenKey = `${options.keyPrefix}token`
    this.#lockKey = `${options.keyPrefix}token:lock`
    this.#failing = new SharedWindow(options.redis, `${options.keyPrefix}token:failing`, options.log)
    this.#lockTtlMs = options.lockTtlMs
    this.#log = options.log
    this.#now = options.now ?? Date.now
  }

  async read (): Promise<AccessToken | undefined> {
    let reply: unknown
    try {
      reply = await this.#redis.eval(READ, 1, this.#tokenKey)
    } catch (err) {
      this.#log.debug({ err }, 'shared token unreadable')
      return undefined
    }
    const [sealed, leftMs] = Array.isArray(reply) ? reply as unknown[] : []
    if (typeof sealed !== 'string' || typeof leftMs !== 'number' || leftMs <= 0) return undefined
    const plain = this.#cipher.open(sealed, this.#tokenKey)
    const stored = plain === undefined ? undefined : parseStored(plain)
    if (stored === undefined) return undefined
    const expiresAt = this.#now() + leftMs
    return { value: stored.value, issuedAt: expiresAt - stored.lifetimeMs, expiresAt }
  }

  async write (token: AccessToken): Promise<void> {
    const leftMs = Math.floor(token.expiresAt - this.#now())
    if (leftMs <= 0) return
    const plain = JSON.stringify({ value: token.value, lifetimeMs: token.expiresAt - token.issuedAt })
    try {
      await this.#redis.set(this.#tokenKey, this.#cipher.seal(plain, this.#tokenKey), 'PX', leftMs)
    } catch (err) {
      this.#log.debug({ err }, 'shared token not written')
    }
  }

  async tryLock (): Promise<string | undefined> {
    const owner = randomUUID()
    try {
      return await this.#redis.set(this.#lockKey, owner, 'PX', this.#lockTtlMs, 'NX') === 'OK' ? owner : undefined
    } catch (err) {
      this.#log.debug({ err }, 'token lock unavailable; exchanging without it')
      return owner
    }
  }

  async unlock (owner: string): Promise<void> {
    try {
      await this.#redis.eval(UNLOCK, 1, this.#lockKey, owner)
    } catch (err) {
      this.#log.debug({ err }, 'token lock not released; it expires on its own')
    }
  }

  async failingForMs (): Promise<number> {
    return await this.#failing.remainingMs()
  }

  async markFailing (ms: number): Promise<void> {
    await this.#failing.extend(ms)
  }
}

function parseStored (plain: string): { value: string, lifetimeMs: number } | undefined {
  try {
    const { value, lifetimeMs } = JSON.parse(plain) as Record<string, unknown>
    return typeof value === 'string' && typeof lifetimeMs === 'number' ? { value, lifetimeMs } : undefined
  } catch {
    return undefined
  }
}
