import { markedStale, type CacheEntry } from './cache-entry.ts'
import type { CacheDriver, ClaimedLoad, PurgeMark, Tier } from './driver.ts'
import { HandBack } from './hand-back.ts'
import type { MemoryDriver } from './memory-driver.ts'
import type { NearCopies } from './near-copies.ts'
import type { BusEvent, RedisBus } from '../redis/bus.ts'
import type { RedisHealth } from '../redis/health.ts'
import type { HeldLock } from '../redis/owner-lock.ts'
import { split, withHeard } from './load-mark.ts'

/** What the tier hears on the bus: the other instances' events, and when events stop and start reaching it. */
export type TierBus = Pick<RedisBus, 'listen' | 'publish' | 'ready' | 'listenReady' | 'listenLost'>

export interface SharedTierOptions {
  /** Redis. */
  driver: CacheDriver
  /** Whether Redis answers (the data connection): while it does, Redis is the cache, with or without the bus. */
  redis: Pick<RedisHealth, 'up' | 'listen'>
  /** The other instances' fills and purges, which drop copies here at once (without it, copies last their 2 s). */
  bus: TierBus
  /** Copies of hot shared entries, kept coherent by the bus. */
  copies: NearCopies
  /** What this instance holds that Redis may lack: its fills while Redis was away, or refused them. */
  alone: MemoryDriver
  /** A write or an event that could not reach Redis (the instance goes on with what it holds). */
  onError: (error: unknown, key: string) => void
}

/**
 * Redis with this instance in front of it. While Redis is up, hits are answered from short copies, shared reads of one
 * key are made once however many requests want it, and fills and purges are told to the other instances; with the bus
 * down or flapping too, only the copies' own bound (2 s) keeps them coherent. While Redis itself is down, this
 * instance's own store is the cache, for each entry's whole life (what only the copies' bound vouched for, 2 s fresh),
 * so the upstream stays sheltered. What it holds alone is read before Redis, and handed to Redis as soon as Redis takes
 * writes again, so that no hot key turns into an upstream call: stale where Redis holds a version of the key, since a
 * purge made meanwhile may be forgotten there.
 */
export class SharedTier implements Tier {
  readonly #driver: CacheDriver
  readonly #redis: SharedTierOptions['redis']
  readonly #bus: SharedTierOptions['bus']
  readonly #copies: NearCopies
  readonly #alone: MemoryDriver
  readonly #onError: SharedTierOptions['onError']
  /** Shared reads in flight: a hot key's requests arrive together when its copy expires. */
  readonly #reading = new Map<string, Promise<CacheEntry | undefined>>()
  /** Loads claimed by reads that found nothing servable, until the load they started takes them (see `takeClaim`). */
  readonly #claimed = new Map<string, ClaimedLoad>()
  readonly #handBack: HandBack

  constructor (options: SharedTierOptions) {
    this.#driver = options.driver
    this.#redis = options.redis
    this.#bus = options.bus
    this.#copies = options.copies
    this.#alone = options.alone
    this.#onError = options.onError
    this.#handBack = new HandBack({
      driver: options.driver,
      alone: options.alone,
      copies: options.copies,
      up: () => this.#redis.up,
      announce: (key, stored) => { this.#announce(key, stored) },
      onError: (error) => { this.#onError(error, '') }
    })
    options.bus.listen((event) => { this.#hear(event) })
    options.bus.listenReady(() => { this.#copies.trustAgain() })
    // Lost alone, events may be missed while Redis answers; lost with Redis, what is known is adopted (below).
    options.bus.listenLost(() => { if (this.#redis.up) this.#copies.distrust() })
    if (options.bus.ready) this.#copies.trustAgain()
    options.redis.listen((up) => { if (up) this.#handBack.start(); else this.#adoptCopies() })
  }

  held (key: string): CacheEntry | undefined {
    if (!this.#redis.up) return this.#alone.held(key)
    // What this instance holds that Redis may lack: nearly always nothing, and then no lookup.
    return this.#copies.get(key) ?? (this.#alone.size === 0 ? undefined : this.#alone.held(key))
  }

  async get (key: string, claiming = true): Promise<CacheEntry | undefined> {
    const held = this.held(key)
    if (held !== undefined || !this.#redis.up) return held
    let reading = this.#reading.get(key)
    if (reading === undefined) {
      const read = this.#readShared(key, claiming)
      reading = read
      this.#reading.set(key, read)
      const done = (): void => { if (this.#reading.get(key) === read) this.#reading.delete(key) }
      read.then(done, done)
    }
    return await this.#orAlone(reading, async () => this.#alone.held(key)).catch((error: unknown) => this.#lastKnown(key, error))
  }

  async latest (key: string): Promise<CacheEntry | undefined> {
    if (!this.#redis.up) return this.#alone.held(key)
    return await this.#orAlone(this.#readShared(key), async () => this.#alone.held(key))
  }

  /**
   * The mark of the store a fill would go to now, with the last purge heard here (see load-mark.ts). Should the load end
   * on the other side of an outage's edge, that store takes it for no mark: stale if it remembers a purge.
   */
  async purgeMark (key: string): Promise<PurgeMark> {
    const heard = this.#alone.lastPurge(key)
    const alone = async (): Promise<PurgeMark> => withHeard(await this.#alone.purgeMark(key), heard)
    if (!this.#redis.up) return await alone()
    return await this.#orAlone(this.#driver.purgeMark(key).then((shared) => withHeard(shared, heard)), alone)
  }

  takeClaim (key: string): ClaimedLoad | undefined {
    const claimed = this.#claimed.get(key)
    this.#claimed.delete(key)
    return claimed
  }

  /** Told to the other instances, and `lock` released, by the driver's write where it can (one round trip), else by their owners. */
  async set (key: string, entry: CacheEntry, loadMark?: PurgeMark, lock?: HeldLock): Promise<CacheEntry | undefined> {
    const { mark, heard } = split(loadMark)
    if (!this.#redis.up) return await this.#alone.set(key, entry, mark)
    const generation = this.#copies.generation
    // A purge heard or made here since the load began (one forgotten since came long before it).
    const last = this.#alone.lastPurge(key)
    const fill = heard !== undefined && last !== '' && last !== heard && await this.#markLost(key) ? markedStale(entry) : entry
    let stored: CacheEntry | undefined
    try {
      stored = await this.#driver.set(key, fill, mark, lock)
    } catch (error) {
      // Redis refused it (or failed meanwhile): the load still shelters the upstream from here, and is handed over later.
      this.#onError(error, key)
      return await this.#alone.set(key, ...await this.#judged(key, fill, mark))
    }
    // Redis went away meanwhile (another command failed): held alone too, as Redis took it (stale, if a purge came since).
    if (!this.#redis.up) return stored === undefined ? undefined : await this.#alone.set(key, stored, mark)
    // A read that started before this write may answer what it replaced, and what was held alone is older.
    this.#reading.delete(key)
    this.#alone.forget(key)
    // Redis takes writes: whatever is held alone can go too.
    this.#handBack.start()
    if (stored === undefined) return undefined
    this.#copies.keep(key, stored, generation)
    this.#announce(key, stored)
    return stored
  }

  /** After a purge heard during a load: a mark, and Redis's script orders the two; none, and Redis lost it (a restart, an eviction). */
  async #markLost (key: string): Promise<boolean> {
    return await this.#driver.purgeMark(key).catch(() => '') === ''
  }

  /**
   * A fill Redis refused, as this instance's store should take it: where Redis can still be read (a write refused: OOM,
   * READONLY), its purge mark says whether a purge came since the load read `mark`, and a purge made here (which Redis
   * may have refused too) keeps it stale; else this store's memory of purges judges it (see MemoryDriver.purgedElsewhere).
   */
  async #judged (key: string, entry: CacheEntry, mark: PurgeMark | undefined): Promise<[CacheEntry, PurgeMark | undefined]> {
    const current = mark === undefined ? undefined : await this.#driver.purgeMark(key).catch(() => undefined)
    if (current === undefined) return [entry, mark]
    return [current === mark && !this.#alone.purgedHere(key) ? entry : markedStale(entry), await this.#alone.purgeMark(key)]
  }

  /** Here at once; in Redis too, which rejects while it is down (the purge then did not reach the other instances). */
  async markStale (keys: readonly string[], now: number): Promise<number> {
    // A read or write under way (a revalidation's) may answer the entry before the purge: not copied here.
    const known = this.#changed(keys)
    try {
      const alone = await this.#alone.markStale(keys, now)
      // Redis away: what this instance knew stays here, stale (its store remembers the purge), for while the upstream fails.
      const shared = await this.#driver.markStale(keys, now).catch(async (error: unknown) => { for (const [key, entry] of known) await this.#alone.set(key, entry); throw error })
      this.#alone.purgesShared(keys)
      if (this.#driver.announcesFills !== true) await Promise.all(keys.map(async (key) => await this.#bus.publish({ type: 'staled', key })))
      return Math.max(alone, shared)
    } finally {
      // Nor one that started while the purge was on its way to Redis, which it may have preceded there.
      this.#changed(keys)
    }
  }

  clear (): void {
    this.#copies.clear()
    this.#alone.clear()
  }

  /** Redis answers, but not for this key (its shard failing over, say): what this instance last knew, rather than a load. */
  #lastKnown (key: string, error: unknown): CacheEntry {
    const known = this.#copies.lastKnown(key)
    if (known === undefined) throw error
    this.#onError(error, key)
    return known
  }

  /** `shared`'s answer; if it fails because Redis went down meanwhile, what this instance holds. */
  async #orAlone<T> (shared: Promise<T>, alone: () => Promise<T>): Promise<T> {
    try {
      return await shared
    } catch (error) {
      if (this.#redis.up) throw error
      return await alone()
    }
  }

  /** With `claiming`, a read that finds nothing servable claims the key's load too, where the driver can: kept for that load. */
  async #readShared (key: string, claiming = false): Promise<CacheEntry | undefined> {
    const generation = this.#copies.generation
    const heard = this.#alone.lastPurge(key)
    const { entry, claimed } = claiming && this.#driver.getOrClaim !== undefined ? await this.#driver.getOrClaim(key) : { entry: await this.#driver.get(key) }
    if (claimed !== undefined) this.#keepClaim(key, { ...claimed, mark: withHeard(claimed.mark, heard) })
    if (entry !== undefined && this.#redis.up) this.#copies.keep(key, entry, generation)
    return entry
  }

  /**
   * The load this read starts takes it within the same turn of the event loop (the cache goes from a miss to its load
   * without I/O); one nobody took (the miss joined a load under way, or was refused) is released then.
   */
  #keepClaim (key: string, claimed: ClaimedLoad): void {
    if (this.#claimed.has(key)) this.#dropClaim(key)
    this.#claimed.set(key, claimed)
    setImmediate(() => { if (this.#claimed.get(key) === claimed) this.#dropClaim(key) })
  }

  #dropClaim (key: string): void {
    const dropped = this.takeClaim(key)
    if (dropped?.claim.owner === true) dropped.claim.release().catch(() => {})
  }

  /** Stored is stored: a lost event costs the other instances' copies at most their few seconds; nobody waits for it. */
  #announce (key: string, stored: CacheEntry): void {
    if (this.#driver.announcesFills === true) return
    this.#bus.publish({ type: 'filled', key, etag: stored.etag }).catch((error: unknown) => { this.#onError(error, key) })
  }

  #changed (keys: readonly string[]): Array<[string, CacheEntry]> {
    for (const key of keys) this.#reading.delete(key)
    return this.#copies.changed(keys)
  }

  #hear (event: BusEvent): void {
    if (!this.#copies.hear(event)) return
    // A request after another instance's fill or purge reads Redis anew, past what this instance holds.
    this.#reading.delete(event.key)
    if (event.type === 'staled') this.#alone.purgedElsewhere(event.key)
    else this.#alone.forget(event.key)
  }

  /** Redis is away: what is known is kept alone for its life (see NearCopies.take), not loaded again; handed back, it undoes no purge (see HANDED_BACK). */
  #adoptCopies (): void {
    for (const [key, copy] of this.#copies.take()) this.#alone.set(key, copy).catch(() => {})
  }
}
