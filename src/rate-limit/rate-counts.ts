import type { LRUCache } from 'lru-cache'
import { clientLru } from './policy.ts'

/** A client's count in its window, this request's included, and the ms left in that window. */
export interface RateCount { current: number, ttl: number }

/** Where the per-client counts live. `add` answers at once, from this process (a hit takes no promise for it). */
export interface RateCounts {
  add: (client: string, times: number) => RateCount
  close: () => Promise<void>
}

export interface LocalRateCountsOptions {
  windowMs: number
  /** Clients counted at once; past it the least recently seen is forgotten. */
  maxClients: number
  now: () => number
}

interface Window { count: number, endsAt: number }

/** Without Redis: each client's window opens with its first request, counted in this process only. */
export class LocalRateCounts implements RateCounts {
  readonly #windows: LRUCache<string, Window>
  readonly #windowMs: number
  readonly #now: () => number

  constructor ({ windowMs, maxClients, now }: LocalRateCountsOptions) {
    this.#windows = clientLru(maxClients)
    this.#windowMs = windowMs
    this.#now = now
  }

  add (client: string, times: number): RateCount {
    const now = this.#now()
    let window = this.#windows.get(client)
    if (window === undefined || window.endsAt <= now) {
      window = { count: 0, endsAt: now + this.#windowMs }
      this.#windows.set(client, window)
    }
    window.count += times
    return { current: window.count, ttl: window.endsAt - now }
  }

  async close (): Promise<void> {
    this.#windows.clear()
  }
}
