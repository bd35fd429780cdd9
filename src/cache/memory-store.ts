import { entrySize, markedStale, type CacheEntry } from './cache-entry.js'
import { BoundedMap } from './bounded-map.js'
import type { CacheStore } from './store.js'

export const DEFAULT_MAX_ENTRIES = 10_000
/** Counted as string lengths plus a little per entry: an approximation of the heap it takes. */
export const DEFAULT_MAX_BYTES = 64 * 1024 * 1024

export interface MemoryStoreOptions {
  maxEntries?: number
  maxBytes?: number
  now?: () => number
}

/**
 * The embedded default, for a single instance: a bounded map in this process (least recently used
 * entries go first), each entry forgotten when it can no longer be served.
 */
export class MemoryStore implements CacheStore {
  readonly #entries: BoundedMap<CacheEntry>
  readonly #now: () => number

  constructor ({ maxEntries = DEFAULT_MAX_ENTRIES, maxBytes = DEFAULT_MAX_BYTES, now = Date.now }: MemoryStoreOptions = {}) {
    this.#entries = new BoundedMap({ maxEntries, maxBytes, sizeOf: entrySize })
    this.#now = now
  }

  get size (): number {
    return this.#entries.size
  }

  get bytes (): number {
    return this.#entries.bytes
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    return this.#entries.get(key, this.#now())
  }

  async set (key: string, entry: CacheEntry): Promise<boolean> {
    const current = this.#entries.peek(key)
    if (current !== undefined && current.storedAt > entry.storedAt) return false
    this.#entries.set(key, entry, entry.staleUntil)
    return true
  }

  async markStale (keys: readonly string[], now: number): Promise<number> {
    let found = 0
    for (const key of keys) {
      const entry = this.#entries.get(key, now)
      if (entry === undefined) continue
      this.#entries.set(key, markedStale(entry, now), entry.staleUntil)
      found++
    }
    return found
  }

  async close (): Promise<void> {
    this.#entries.clear()
  }
}
