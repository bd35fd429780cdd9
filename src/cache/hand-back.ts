import type { CacheEntry } from './cache-entry.ts'
import { HANDED_BACK, type CacheDriver } from './driver.ts'
import type { MemoryDriver } from './memory-driver.ts'
import type { NearCopies } from './near-copies.ts'

/** Entries handed to Redis at once. */
const BATCH = 100

export interface HandBackOptions {
  driver: Pick<CacheDriver, 'set'>
  /** What this instance holds alone: its fills while Redis was away, or refused them. */
  alone: MemoryDriver
  copies: NearCopies
  /** Whether Redis answers now. */
  up: () => boolean
  /** What Redis stored, told to the other instances. */
  announce: (key: string, stored: CacheEntry) => void
  onError: (error: unknown) => void
}

/**
 * What this instance held alone, handed to Redis as soon as Redis takes writes again, so that no hot key turns into an
 * upstream call: never fresh over a version Redis holds, since a purge made meanwhile may be forgotten there (see
 * HANDED_BACK). Once at a time, until nothing is held alone; one Redis refuses is tried again at the next fill.
 */
export class HandBack {
  readonly #options: HandBackOptions
  #running = false
  /** A fill Redis took while a hand-back was under way: what it left is tried again after it. */
  #again = false

  constructor (options: HandBackOptions) {
    this.#options = options
  }

  start (): void {
    if (this.#running) {
      this.#again = true
      return
    }
    if (this.#options.alone.size === 0) return
    this.#running = true
    this.#again = false
    this.#handOver().catch(this.#options.onError).finally(() => {
      this.#running = false
      if (this.#again) this.start()
    })
  }

  /** Each entry handed over leaves this instance's store, unless a newer fill replaced it meanwhile. */
  async #handOver (): Promise<void> {
    const { driver, alone, copies, up, announce } = this.#options
    while (alone.size > 0 && up()) {
      const entries = [...alone.entries()]
      // The store's count includes what has expired and is not yet purged, which its snapshot skips.
      if (entries.length === 0) return alone.dropExpired()
      for (let i = 0; i < entries.length; i += BATCH) {
        await Promise.all(entries.slice(i, i + BATCH).map(async ([key, entry]) => {
          const generation = copies.generation
          const stored = await driver.set(key, entry, HANDED_BACK)
          // Redis gone again meanwhile (a shard failing over, say): still held alone. Else what Redis holds is copied,
          // and known here should Redis flap away again.
          if (!up()) return
          alone.forget(key, entry)
          if (stored === undefined) return
          copies.keep(key, stored, generation)
          announce(key, stored)
        }))
      }
    }
  }
}
