import type { LRUCache } from 'lru-cache'
import { boundedLru, setUntil } from './bounded-lru.ts'
import { entrySize, isFresh, type CacheEntry } from './cache-entry.ts'
import type { BusEvent } from '../redis/bus.ts'

export interface NearCopiesOptions {
  /** How long a copy is held at most (it also leaves when it stops being fresh). */
  ttlMs?: number
  maxEntries?: number
  maxBytes?: number
  now: () => number
}

/**
 * Copies last a few seconds at most (a missed event, in a gap the reconnection did not notice, cannot
 * last longer), and are few, since they only hold what is hot.
 */
const COPY_TTL_MS = 2_000
const COPY_MAX_ENTRIES = 1_000
const COPY_MAX_BYTES = 16 * 1024 * 1024

/**
 * Short-lived copies of fresh shared entries, so that a hit costs no Redis round trip, kept coherent by
 * the other instances' events: a fill or purge elsewhere drops the copy here. A read or write that
 * overlapped any such change may hold what the change replaced, so it is not copied: `generation`
 * counts the changes, and `keep` takes the generation its read or write started in.
 */
export class NearCopies {
  readonly #copies: LRUCache<string, CacheEntry>
  readonly #ttlMs: number
  readonly #now: () => number
  #generation = 0

  constructor ({ ttlMs = COPY_TTL_MS, maxEntries = COPY_MAX_ENTRIES, maxBytes = COPY_MAX_BYTES, now }: NearCopiesOptions) {
    this.#copies = boundedLru({ maxEntries, maxBytes, sizeOf: entrySize, now })
    this.#ttlMs = ttlMs
    this.#now = now
  }

  get generation (): number {
    return this.#generation
  }

  get (key: string): CacheEntry | undefined {
    return this.#copies.get(key)
  }

  /** Copies an entry read or written since `generation`, unless some entry changed meanwhile. */
  keep (key: string, entry: CacheEntry, generation: number): void {
    const now = this.#now()
    if (generation !== this.#generation || !isFresh(entry, now)) return
    setUntil(this.#copies, key, entry, Math.min(now + this.#ttlMs, entry.freshUntil))
  }

  /** These keys changed here (a purge): their copies go, and nothing under way is copied. */
  changed (keys: readonly string[]): void {
    this.#generation++
    for (const key of keys) this.#copies.delete(key)
  }

  /** Another instance's event: true when the key's copy went (a fill of the very version held keeps it). */
  hear (event: BusEvent): boolean {
    if (event.type === 'released') return false
    this.#generation++
    if (event.type === 'filled' && this.#copies.peek(event.key)?.etag === event.etag) return false
    this.#copies.delete(event.key)
    return true
  }

  /** Every copy, removed from here: events may be missed from now on, so they stop being copies. */
  take (): Array<[string, CacheEntry]> {
    // A read under way may answer from before the gap: it copies nothing.
    this.#generation++
    const copies = [...this.#copies.entries()]
    this.#copies.clear()
    return copies
  }

  clear (): void {
    this.#copies.clear()
  }
}
