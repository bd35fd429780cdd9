import { randomUUID } from 'node:crypto'
import { entrySize, markedStale, type CacheEntry } from './cache-entry.ts'
import type { LRUCache } from 'lru-cache'
import { boundedLru, setUntil } from './bounded-lru.ts'
import type { PurgeMark, Tier } from './driver.ts'

export const DEFAULT_MAX_ENTRIES = 10_000
/** Counted as string lengths plus a little per entry: an approximation of the heap it takes. */
export const DEFAULT_MAX_BYTES = 64 * 1024 * 1024

export interface MemoryDriverOptions {
  maxEntries?: number
  maxBytes?: number
  /** How long a purge is remembered for the loads that started before it (see load-budget.ts). */
  purgeMemoryMs: number
  now: () => number
}

/**
 * The embedded default, and an instance's own store while Redis is away: bounded, each entry gone once
 * unservable. Its reads need no I/O, so it is a tier on its own.
 */
export class MemoryDriver implements Tier {
  readonly #entries: LRUCache<string, CacheEntry>
  /** Each key's last purge mark, while a load that started before it may still be running. */
  readonly #purged: LRUCache<string, PurgeMark>
  readonly #purgeMemoryMs: number

  constructor ({ maxEntries = DEFAULT_MAX_ENTRIES, maxBytes = DEFAULT_MAX_BYTES, purgeMemoryMs, now }: MemoryDriverOptions) {
    this.#entries = boundedLru({ maxEntries, maxBytes, sizeOf: entrySize, now })
    this.#purged = boundedLru({ maxEntries, now })
    this.#purgeMemoryMs = purgeMemoryMs
  }

  get size (): number {
    return this.#entries.size
  }

  get bytes (): number {
    return this.#entries.calculatedSize
  }

  held (key: string): CacheEntry | undefined {
    return this.#entries.get(key)
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    return this.held(key)
  }

  async latest (key: string): Promise<CacheEntry | undefined> {
    return this.held(key)
  }

  async purgeMark (key: string): Promise<PurgeMark> {
    return this.#purged.get(key) ?? ''
  }

  async set (key: string, entry: CacheEntry, mark = ''): Promise<CacheEntry | undefined> {
    const current = this.#entries.peek(key)
    if (current !== undefined && current.storedAt > entry.storedAt) return undefined
    const purged = this.#purged.get(key)
    const stored = purged !== undefined && purged !== mark ? markedStale(entry, entry.storedAt) : entry
    setUntil(this.#entries, key, stored, stored.staleUntil)
    return stored
  }

  async markStale (keys: readonly string[], now: number): Promise<number> {
    let found = 0
    const mark = randomUUID()
    for (const key of keys) {
      setUntil(this.#purged, key, mark, now + this.#purgeMemoryMs)
      const entry = this.#entries.get(key)
      if (entry === undefined) continue
      setUntil(this.#entries, key, markedStale(entry, now), entry.staleUntil)
      found++
    }
    return found
  }

  /** Drops the key's entry, if it is still `entry` when given: one stored since is kept. */
  forget (key: string, entry?: CacheEntry): void {
    if (entry === undefined || this.#entries.peek(key) === entry) this.#entries.delete(key)
  }

  /** What is held, for handing over to Redis when it is back. */
  entries (): IterableIterator<[string, CacheEntry]> {
    return this.#entries.entries()
  }

  clear (): void {
    this.#entries.clear()
    this.#purged.clear()
  }
}
