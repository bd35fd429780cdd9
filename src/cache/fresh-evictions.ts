/** How often at most a warning says that the in-process store pushes out fresh entries. */
export const WARN_EVERY_MS = 60_000

export interface FreshEvictionsOptions {
  now: () => number
  /** One line, at most every WARN_EVERY_MS while evictions happen: how many since the last one (the first included). */
  warn: (evicted: number) => void
}

/** Fresh entries pushed out of the in-process store: each one said, at most once a minute in one line, while it goes on. */
export class FreshEvictions {
  readonly #now: () => number
  readonly #warn: (evicted: number) => void
  #unsaid = 0
  #nextWarnAt = Number.NEGATIVE_INFINITY

  constructor ({ now, warn }: FreshEvictionsOptions) {
    this.#now = now
    this.#warn = warn
  }

  evicted (): void {
    this.#unsaid++
    const now = this.#now()
    if (now < this.#nextWarnAt) return
    this.#warn(this.#unsaid)
    this.#unsaid = 0
    this.#nextWarnAt = now + WARN_EVERY_MS
  }
}
