import { randomUUID } from 'node:crypto'
import { isFresh, markedStale, type CacheEntry } from './cache-entry.ts'
import type { LRUCache } from 'lru-cache'
import type { StoreTelemetry } from '../telemetry/telemetry.ts'
import { boundedLru, setUntil } from './bounded-lru.ts'
import type { PurgeMark, Tier } from './driver.ts'
import { entryBytes } from './entry-bytes.ts'

/** CACHE_MEMORY_MB's default, in bytes: the heap the entries take, counted by `entryBytes`. */
const DEFAULT_MAX_BYTES = 64 * 1024 * 1024
/** Purge marks are small and remembered for `purgeMemoryMs` only: a count bounds them. */
const MAX_PURGE_MARKS = 10_000
/** How the mark of a purge Redis has starts (heard from another instance, or made here and taken): one without it Redis may lack. */
const SHARED = 'shared:'

export interface MemoryDriverOptions {
  /** The bound of the entries' heap (see entry-bytes.ts); there is no count cap besides. */
  maxBytes?: number
  /** What the encodings of a body will hold (0: none made); default none. */
  encodedBytes?: (body: string) => number
  /** Told what the store holds (read when the metrics are rendered), and of each still-fresh entry its bound pushed out. */
  telemetry?: StoreTelemetry
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
  readonly #now: () => number
  readonly #telemetry: StoreTelemetry | undefined

  constructor ({ maxBytes = DEFAULT_MAX_BYTES, encodedBytes = () => 0, telemetry, purgeMemoryMs, now }: MemoryDriverOptions) {
    this.#entries = boundedLru({
      maxBytes,
      sizeOf: (entry, key) => entryBytes(key, entry, encodedBytes),
      ...(telemetry !== undefined && { onEvict: (entry: CacheEntry) => { if (isFresh(entry, now())) telemetry.freshEviction() } }),
      now
    })
    this.#purged = boundedLru({ maxEntries: MAX_PURGE_MARKS, now })
    this.#purgeMemoryMs = purgeMemoryMs
    this.#now = now
    this.#telemetry = telemetry
    telemetry?.memoryStore(() => ({ entries: this.size, bytes: this.bytes, maxBytes }))
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
    const stored = purged !== undefined && purged !== mark ? markedStale(entry) : entry
    setUntil(this.#entries, key, stored, stored.staleUntil)
    if (this.#entries.peek(key) === stored) return stored
    // lru-cache drops a value larger than its whole bound without a word: told as a fresh entry pushed out.
    if (isFresh(stored, this.#now())) this.#telemetry?.freshEviction()
    return undefined
  }

  async markStale (keys: readonly string[], now: number): Promise<number> {
    let found = 0
    const mark = randomUUID()
    for (const key of keys) {
      setUntil(this.#purged, key, mark, now + this.#purgeMemoryMs)
      const entry = this.#entries.get(key)
      if (entry === undefined) continue
      setUntil(this.#entries, key, markedStale(entry), entry.staleUntil)
      found++
    }
    return found
  }

  /**
   * Another instance purged `key` (heard on the bus): what it held is dropped, and a load that read Redis's purge mark
   * before may be stored here (Redis gone before it could store it), so its fill will be stored stale, as Redis would.
   * One that read the mark after is stored stale too: one revalidation more, never a purge undone.
   */
  purgedElsewhere (key: string): void {
    this.#entries.delete(key)
    setUntil(this.#purged, key, `${SHARED}${randomUUID()}`, this.#now() + this.#purgeMemoryMs)
  }

  /** The last purge of `key` it remembers, heard or made here ('' for none): the same once Redis has taken it. */
  lastPurge (key: string): string {
    const mark = this.#purged.get(key) ?? ''
    return mark.startsWith(SHARED) ? mark.slice(SHARED.length) : mark
  }

  /** Whether the last purge of `key` it remembers was made here and Redis has not taken it. */
  purgedHere (key: string): boolean {
    return this.#purged.get(key)?.startsWith(SHARED) === false
  }

  /** Redis took the purges of `keys` made here: its own mark now tells a load before them from one after. */
  purgesShared (keys: readonly string[]): void {
    for (const key of keys) {
      const mark = this.#purged.get(key)
      const until = this.#purged.getRemainingTTL(key)
      if (mark !== undefined && !mark.startsWith(SHARED)) setUntil(this.#purged, key, `${SHARED}${mark}`, this.#now() + until)
    }
  }

  /** Drops the key's entry, if it is still `entry` when given: one stored since is kept. */
  forget (key: string, entry?: CacheEntry): void {
    if (entry === undefined || this.#entries.peek(key) === entry) this.#entries.delete(key)
  }

  /** Drops what is past its stale window: `size` counts it until then. */
  dropExpired (): void {
    this.#entries.purgeStale()
  }

  /** What is held, for handing over to Redis when it is back: what has expired, not. */
  entries (): IterableIterator<[string, CacheEntry]> {
    return this.#entries.entries()
  }

  clear (): void {
    this.#entries.clear()
    this.#purged.clear()
  }
}
