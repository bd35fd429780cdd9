import type { RedisBus } from '../redis/bus.ts'
import type { RedisCommands } from '../redis/commands.ts'
import type { RedisHealth } from '../redis/health.ts'
import type { Claim, OwnerLock } from '../redis/owner-lock.ts'
import { SharedWindow } from '../redis/shared-window.ts'
import type { UpstreamLog } from './log.ts'
import type { TokenCipher } from './token-cipher.ts'
import type { AccessToken } from './access-token.ts'
import { steadyNow } from '../steady-clock.ts'

/**
 * Where instances on one Redis share the token: the sealed token itself, a lock naming the one instance
 * exchanging credentials, and a window during which the identity provider is known to be failing.
 */
export interface TokenStore {
  read: () => Promise<AccessToken | undefined>
  /** `onlyIfAbsent`: never over a token another instance wrote (SET NX). */
  write: (token: AccessToken, onlyIfAbsent?: boolean) => Promise<void>
  /** Each time Redis is back after an outage: writes `held()`, if any, unless Redis holds a token (one SET NX). */
  handBack: (held: () => AccessToken | undefined) => void
  /** Who exchanges: this instance, or another one (wait for `settled`); undefined when instances cannot coordinate (Redis away). */
  claim: () => Promise<Claim | undefined>
  failingForMs: () => Promise<number>
  markFailing: (ms: number) => Promise<void>
  /** `listener` runs each time another instance stored a token, or when such news may have been missed (the bus back). */
  onStored: (listener: () => void) => void
}

export interface RedisTokenStoreOptions {
  redis: Pick<RedisCommands, 'eval' | 'pttl'>
  health: Pick<RedisHealth, 'run' | 'listen'>
  /** The exchange's lock; its release wakes the other instances through the bus. */
  lock: Pick<OwnerLock, 'claim'>
  /** Where a stored token is told to the other instances (absent: they learn of it when they next read the store). */
  bus?: Pick<RedisBus, 'channel' | 'message' | 'listen' | 'listenReady'>
  cipher: TokenCipher
  keyPrefix: string
  log: UpstreamLog
  now?: () => number
}

/** The sealed value and what remains of its life, in one round trip (Redis's clock, not ours). */
const READ = "return { redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1]) }"

/** Stores the sealed token (NX: only if none is there) and, when stored, tells the other instances (ARGV[4], a channel) in the same step. */
const WRITE = `local stored
if ARGV[3] == 'NX' then stored = redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX')
else stored = redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
if stored and ARGV[4] ~= '' then redis.call('publish', ARGV[4], ARGV[5]) end
return stored and 1 or 0`

/**
 * The token store on Redis. Every failure of Redis fails open, and while Redis is down at once (no
 * shared token, no lock, no shared failure): an instance cut off from Redis and holding no usable token
 * exchanges for itself rather than stopping (TokenSharing).
 */
export class RedisTokenStore implements TokenStore {
  readonly #redis: RedisTokenStoreOptions['redis']
  readonly #health: RedisTokenStoreOptions['health']
  readonly #lock: RedisTokenStoreOptions['lock']
  readonly #bus: RedisTokenStoreOptions['bus']
  readonly #cipher: TokenCipher
  readonly #tokenKey: string
  readonly #failing: SharedWindow
  readonly #log: UpstreamLog
  readonly #now: () => number

  constructor (options: RedisTokenStoreOptions) {
    this.#redis = options.redis
    this.#health = options.health
    this.#lock = options.lock
    this.#bus = options.bus
    this.#cipher = options.cipher
    this.#tokenKey = sharedTokenKey(options.keyPrefix, options.cipher)
    const key = `${this.#tokenKey}:failing`
    this.#failing = new SharedWindow({
      redis: options.redis,
      health: options.health,
      key,
      onError: (err) => options.log.debug({ err, key }, 'shared window unavailable; using the local one')
    })
    this.#log = options.log
    this.#now = options.now ?? steadyNow
  }

  async read (): Promise<AccessToken | undefined> {
    let reply: unknown
    try {
      reply = await this.#health.run(async () => await this.#redis.eval(READ, 1, this.#tokenKey))
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

  async write (token: AccessToken, onlyIfAbsent = false): Promise<void> {
    const leftMs = Math.floor(token.expiresAt - this.#now())
    if (leftMs <= 0) return
    const plain = JSON.stringify({ value: token.value, lifetimeMs: token.expiresAt - token.issuedAt })
    const bus = this.#bus
    // The event names the key, never the token: the others read it from the store.
    const told = bus === undefined ? ['', ''] : [bus.channel, bus.message({ type: 'filled', key: this.#tokenKey, etag: 'token' })]
    try {
      const sealed = this.#cipher.seal(plain, this.#tokenKey)
      const write = this.#health.run(async () => await this.#redis.eval(WRITE, 1, this.#tokenKey, sealed, leftMs, onlyIfAbsent ? 'NX' : '', ...told))
      // An exchange's token ends the failure window for every instance; sent with the write (one round trip), not in its
      // script: the two keys are on different slots of a Cluster. A token handed back was minted before any such window.
      await Promise.all([write, onlyIfAbsent ? undefined : this.#failing.end()])
    } catch (err) {
      this.#log.debug({ err }, 'shared token not written')
    }
  }

  onStored (listener: () => void): void {
    const bus = this.#bus
    if (bus === undefined) return
    bus.listen((event) => { if (event.type === 'filled' && event.key === this.#tokenKey) listener() })
    // A token stored while the bus was away went untold: worth one look once events reach this instance again.
    bus.listenReady(listener)
  }

  /**
   * A Redis restarted empty, or a replica promoted without the last write, would have the next instance to start
   * exchange again although the deployment holds a usable token (as the cache hands its entries back). Every instance
   * does it at once: NX lets the first write in and refuses the others, a newer token included.
   */
  handBack (held: () => AccessToken | undefined): void {
    this.#health.listen((up) => {
      const token = up ? held() : undefined
      if (token !== undefined) this.write(token, true).catch(() => {}) // write never rejects: logged there
    })
  }

  async claim (): Promise<Claim | undefined> {
    return await this.#lock.claim(this.#tokenKey)
  }

  async failingForMs (): Promise<number> {
    return await this.#failing.remainingMs()
  }

  async markFailing (ms: number): Promise<void> {
    await this.#failing.extend(ms)
  }
}

/** The sealed token's key; its lock and the failure window are named after it (`:lock`, `:failing`). */
export function sharedTokenKey (keyPrefix: string, cipher: Pick<TokenCipher, 'keyId'>): string {
  return `${keyPrefix}token:${cipher.keyId}`
}

function parseStored (plain: string): { value: string, lifetimeMs: number } | undefined {
  try {
    const { value, lifetimeMs } = JSON.parse(plain) as Record<string, unknown>
    return typeof value === 'string' && typeof lifetimeMs === 'number' ? { value, lifetimeMs } : undefined
  } catch {
    return undefined
  }
}
