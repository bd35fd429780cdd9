import type { CacheEntry } from './cache-entry.js'
import type { CacheStore } from './store.js'

export const DEFAULT_MAX_ENTRIES = 10_000

/**
 * The embedded default: a bounded map in this process. A Map keeps insertion order, so re-inserting on
 * every read makes the first key the least recently used one, which is the one evicted.
 */
export class MemoryStore implements CacheStore {
  readonly #entries = new Map<string, CacheEntry>()
  readonly #maxEntries: number
  readonly #now: () => number

  constructor ({ maxEntries = DEFAULT_MAX_ENTRIES, now = Date.now }: { maxEntries?: number, now?: () => number } = {}) {
    this.#maxEntries = maxEntries
    this.#now = now
  }

  get size (): number {
    return this.#entries.size
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    this.#entries.delete(key)
    if (entry.staleUntil <= this.#now()) return undefined
    this.#entries.set(key, entry)
    return entry
  }

  async set (key: string, entry: CacheEntry): Promise<void> {
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    if (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
  }

  async close (): Promise<void> {
    this.#entries.clear()
  }
}
