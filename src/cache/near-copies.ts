import type { LRUCache } from 'lru-cache'
import { boundedLru, setUntil } from './bounded-lru.ts'
import { entrySize, isFresh, type CacheEntry } from './cache-entry.ts'
import type { BusEvent } from '../redis/bus.ts'

export interface NearCopiesOptions {
  now: () => number
}

/**
 * Copies answer for a few seconds at most (a missed event, in a gap the reconnection did not notice, cannot
 * last longer), and are few, since they only hold what is hot.
 */
const COPY_TTL_MS = 2_000
/**
 * How long a copy stays known past that, while no event can have been missed (never past its freshness): long enough
 * for Redis's health to flap through a shard's failover, short enough that a purge missed in a gap the bus did not
 * report (a Cluster subscriber moving to another node) is not served for a whole freshness.
 */
const KNOWN_MS = 10_000
const COPY_MAX_ENTRIES = 1_000
const COPY_MAX_BYTES = 16 * 1024 * 1024
/** Keys whose last change is remembered; past that, the memory starts again as if every key had changed. */
const CHANGES_KEPT = 10_000

interface Copy {
  entry: CacheEntry
  /** Past this, the copy no longer answers a hit; it stays as what was last known for the rest of KNOWN_MS. */
  answersUntil: number
  /** The bus's trust when it was copied: no event since then can have been missed while it is still the current one. */
  trust: number
}

/**
 * Short-lived copies of fresh shared entries, so that a hit costs no Redis round trip, kept coherent by
 * the other instances' events: a fill or purge elsewhere drops the copy here. A read or write that
 * overlapped a change of its key (or a gap in the events) may hold what the change replaced, so it is not copied:
 * `generation` counts the changes, and `keep` takes the generation its read or write started in.
 *
 * Past its few seconds a copy stays a little longer (never past its freshness) as what this instance last knew of the key:
 * trusted while the bus has not been lost since (every change elsewhere would have dropped it), and what the instance
 * answers when Redis cannot be read for that key, rather than loading it again (a shard failing over, an outage).
 */
export class NearCopies {
  readonly #copies: LRUCache<string, Copy>
  readonly #now: () => number
  #generation = 0
  /** The generation of each key's last change, and of the last change that counts for every key. */
  readonly #changedAt = new Map<string, number>()
  #allChangedAt = 0
  /** Bumped each time the bus is lost; copies made while it is away carry none (-1). */
  #trust = 0
  #trusting = false
  /** What was known when the bus was last lost, and when: Redis going away just after (the subscription often goes first) still finds it. */
  #lost = { trust: -1, at: -Infinity }

  constructor ({ now }: NearCopiesOptions) {
    this.#copies = boundedLru({ maxEntries: COPY_MAX_ENTRIES, maxBytes: COPY_MAX_BYTES, sizeOf: (copy) => entrySize(copy.entry), now })
    this.#now = now
  }

  get generation (): number {
    return this.#generation
  }

  /** The copy that answers a hit: one made in the last few seconds. */
  get (key: string): CacheEntry | undefined {
    const copy = this.#copies.get(key)
    return copy !== undefined && this.#now() < copy.answersUntil ? copy.entry : undefined
  }

  /** What this instance last knew of the key (in the last 10 s, and still fresh), with no event missed since. */
  lastKnown (key: string): CacheEntry | undefined {
    const copy = this.#copies.get(key)
    return copy !== undefined && copy.trust === this.#trust ? copy.entry : undefined
  }

  /** Copies an entry read or written since `generation`, unless its key changed meanwhile (or every key did). */
  keep (key: string, entry: CacheEntry, generation: number): void {
    const now = this.#now()
    if (this.#allChangedAt > generation || (this.#changedAt.get(key) ?? 0) > generation || !isFresh(entry, now)) return
    setUntil(this.#copies, key, { entry, answersUntil: now + COPY_TTL_MS, trust: this.#trusting ? this.#trust : -1 }, Math.min(now + KNOWN_MS, entry.freshUntil))
  }

  /** These keys changed here (a purge): their copies go, and nothing under way is copied; answers those still known. */
  changed (keys: readonly string[]): Array<[string, CacheEntry]> {
    const known = keys.flatMap((key): Array<[string, CacheEntry]> => {
      const entry = this.lastKnown(key)
      return entry === undefined ? [] : [[key, entry]]
    })
    for (const key of keys) {
      this.#change(key)
      this.#copies.delete(key)
    }
    return known
  }

  /** Another instance's event: true when the key's copy went (a fill of the very version held keeps it). */
  hear (event: BusEvent): boolean {
    if (event.type === 'released') return false
    this.#change(event.key)
    if (event.type === 'filled' && this.#copies.peek(event.key)?.entry.etag === event.etag) return false
    this.#copies.delete(event.key)
    return true
  }

  /** The bus is lost: events may be missed from now on, so what is held is no longer known, only copied. */
  distrust (): void {
    if (this.#trusting) this.#lost = { trust: this.#trust, at: this.#now() }
    this.#trust++
    this.#trusting = false
  }

  /** The bus is back: copies made from now on are known until a change elsewhere drops them. */
  trustAgain (): void {
    // A read under way may answer from before the gap: it copies nothing.
    this.#changeAll()
    this.#trusting = true
  }

  /**
   * Every copy still known, removed from here: events may be missed from now on, so they stop being copies. One made
   * while the bus was lost is not known (a purge elsewhere may have been missed): it is not taken. What was known when
   * the bus was lost a copy's few seconds ago is taken (Redis's loss often begins there), but fresh only for a copy's
   * few seconds from that loss: a purge missed since then is served as a copy's would be, then the entry is stale.
   */
  take (): Array<[string, CacheEntry]> {
    this.#changeAll()
    const lostUntil = this.#lost.at + COPY_TTL_MS
    const lostJustNow = this.#now() < lostUntil
    const kept = [...this.#copies.entries()].flatMap(([key, copy]): Array<[string, CacheEntry]> => {
      if (copy.trust === this.#trust) return [[key, copy.entry]]
      if (!lostJustNow || copy.trust !== this.#lost.trust) return []
      return [[key, { ...copy.entry, freshUntil: Math.min(copy.entry.freshUntil, lostUntil) }]]
    })
    this.#copies.clear()
    this.distrust()
    return kept
  }

  clear (): void {
    this.#copies.clear()
  }

  #change (key: string): void {
    if (this.#changedAt.size >= CHANGES_KEPT) this.#changeAll()
    this.#changedAt.set(key, ++this.#generation)
  }

  #changeAll (): void {
    this.#changedAt.clear()
    this.#allChangedAt = ++this.#generation
  }
}
