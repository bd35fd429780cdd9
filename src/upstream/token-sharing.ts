import { UPSTREAM_AUTH_FAILED } from '../errors.ts'
import { COMMAND_TIMEOUT_MS } from '../redis/health.ts'
import type { Claim } from '../redis/owner-lock.ts'
import { currentSpan, linkTo } from '../telemetry/tracing.ts'
import type { AccessToken } from './access-token.ts'
import type { Schedule } from './budget/schedule.ts'
import type { UpstreamLog } from './log.ts'
import type { TokenFailures } from './token-failures.ts'
import type { TokenStore } from './token-store.ts'
import { EXCHANGE_DEADLINE_MS, renewalDue, usableUntil } from './token-timing.ts'

/** How often an instance waiting for another's exchange looks at the store again, well within the exchange's deadline. */
const WAITER_LOOK_AGAIN_MS = EXCHANGE_DEADLINE_MS / 4
/** A release missed while the bus is down would hold a waiter for the lock's lifetime, past the exchange's deadline. */
const lookAgainSoon = async (schedule: Schedule): Promise<undefined> => await new Promise((resolve) => { schedule(WAITER_LOOK_AGAIN_MS, () => { resolve(undefined) }) })

export interface TokenSharingOptions {
  store: TokenStore
  /** The manager's own: a failure window found in the store is adopted there. */
  failures: TokenFailures
  log: UpstreamLog
  /** How long an instance waits for another instance's exchange before giving up on it. */
  lockWaitMs: number
  now: () => number
  schedule: Schedule
  /** The token this instance holds while it is still usable, if any. */
  held: () => AccessToken | undefined
  /** The last token the upstream refused: never adopted again. */
  rejected: () => string | undefined
  /** Another instance's token, read after the bus told of it: this instance's from now on. */
  adopt: (token: AccessToken) => void
}

/**
 * The store's steps around an exchange: adopt another instance's token, or exchange under the lock (one instance for
 * the deployment), or wait for the instance that holds it. Without the lock (Redis away or refusing writes) an
 * instance holding a usable token puts its renewal off, so that the deployment renews once, under the lock, when Redis
 * is back; one with nothing usable exchanges alone at once (docs/design.md, "Redis down fails open"). Redis back,
 * the token held is handed back to it (`TokenStore.handBack`).
 */
export class TokenSharing {
  readonly #options: TokenSharingOptions
  #putOffUntil = -Infinity
  #adopting: Promise<AccessToken | undefined> | undefined

  constructor (options: TokenSharingOptions) {
    this.#options = options
    // Only a token another instance would adopt is worth a command.
    options.store.handBack(() => this.#fresh())
    options.store.onStored(() => { this.#readStored() })
  }

  /** The read of a token another instance stored, while it runs: callers wait for it rather than be refused by a back-off it ends. */
  get adopting (): Promise<AccessToken | undefined> | undefined {
    return this.#adopting
  }

  /** A renewal put off for want of the lock is not tried again before this: Redis is asked every WAITER_LOOK_AGAIN_MS at most, not by every caller. */
  get renewalPutOff (): boolean {
    return this.#options.now() < this.#putOffUntil
  }

  /** The deployment's token, `mint`ed here if this instance is the one to exchange. */
  async obtain (mint: () => Promise<AccessToken>): Promise<AccessToken> {
    const { store, now, lockWaitMs, schedule } = this.#options
    const deadline = now() + lockWaitMs
    for (;;) {
      const shared = await this.#fromStore()
      if (shared !== undefined) {
        currentSpan().setAttribute('pbff.token', 'adopted')
        return shared
      }
      const claim = await store.claim()
      if (claim === undefined) return await this.#withoutLock(mint)
      if (claim.owner) return await this.#mintAsOwner(claim, mint)
      if (now() >= deadline) throw new UPSTREAM_AUTH_FAILED('another instance is still exchanging credentials')
      const span = currentSpan()
      span.setAttribute('pbff.token', 'waited')
      // The other instance's exchange, when the message that ended the wait named it (a look again names none).
      linkTo(span, await Promise.race([claim.settled, lookAgainSoon(schedule)]))
    }
  }

  async #withoutLock (mint: () => Promise<AccessToken>): Promise<AccessToken> {
    const { held, now, log } = this.#options
    const token = held()
    // Put off half the way to the token's last usable moment: a Redis refusing writes never comes back, and a renewal
    // left to the end would make callers wait for it, or meet a failing provider with no time left.
    if (token !== undefined && now() < renewalDue(token) + (usableUntil(token) - renewalDue(token)) / 2) {
      this.#putOffUntil = now() + WAITER_LOOK_AGAIN_MS
      throw new UPSTREAM_AUTH_FAILED('the token lock is unavailable: the renewal is put off while the held token serves')
    }
    log.debug({}, 'token lock unavailable; exchanging without it')
    return await this.#mintAsOwner({ owner: true, release: async () => {} }, mint)
  }

  async #mintAsOwner (claim: Claim & { owner: true }, mint: () => Promise<AccessToken>): Promise<AccessToken> {
    const { store, failures } = this.#options
    try {
      // The previous owner may have finished between our look and our lock.
      const shared = await this.#fromStore()
      if (shared !== undefined) return shared
      // A retry: the others refuse their callers meanwhile, rather than wait for it (asked a Redis step later at most).
      if (failures.failing) await store.markFailing(EXCHANGE_DEADLINE_MS + COMMAND_TIMEOUT_MS)
      const token = await mint()
      await store.write(token)
      return token
    } finally {
      await claim.release() // awaited within the exchange's span, which the release names to the instances it wakes
    }
  }

  /** A shared token worth adopting; throws during a failure window another instance opened. Both in one round trip. */
  async #fromStore (): Promise<AccessToken | undefined> {
    const { store, failures } = this.#options
    const [shared, failingMs] = await Promise.all([store.read(), store.failingForMs()])
    if (this.#worthAdopting(shared)) return shared
    if (failingMs > 0) throw failures.adopt(failingMs)
    return undefined
  }

  /**
   * Another instance stored a token: one read (never two at once), unless this instance holds one it need not renew, so
   * that its callers are served with it rather than refused by a back-off taken from the failure window until it ends.
   */
  #readStored (): void {
    if (this.#adopting !== undefined || this.#fresh() !== undefined) return
    const reading = this.#options.store.read().then((shared) => {
      if (!this.#worthAdopting(shared)) return undefined
      this.#options.adopt(shared)
      return shared
    }, () => undefined).finally(() => { if (this.#adopting === reading) this.#adopting = undefined })
    this.#adopting = reading
  }

  #worthAdopting (shared: AccessToken | undefined): shared is AccessToken {
    const { now, rejected } = this.#options
    return shared !== undefined && shared.value !== rejected() && now() < renewalDue(shared)
  }

  /** The token held, while it need not be renewed. */
  #fresh (): AccessToken | undefined {
    const { held, now } = this.#options
    const token = held()
    return token !== undefined && now() < renewalDue(token) ? token : undefined
  }
}
