const WINDOW_MS = 1_000

/**
 * Calls granted per second over the last second, as a sliding-window counter: this window's count and the last one's,
 * the last weighted by how much of it still lies within the second before now. Two numbers, not a list of times.
 */
export class GrantRate {
  #windowStart: number
  #current = 0
  #previous = 0

  constructor (now: number) {
    this.#windowStart = now
  }

  record (now: number): void {
    this.#roll(now)
    this.#current++
  }

  perSecond (now: number): number {
    this.#roll(now)
    const overlap = 1 - Math.max(0, now - this.#windowStart) / WINDOW_MS
    return (this.#previous * overlap + this.#current) * 1000 / WINDOW_MS
  }

  #roll (now: number): void {
    const windows = Math.floor((now - this.#windowStart) / WINDOW_MS)
    if (windows <= 0) return
    this.#previous = windows === 1 ? this.#current : 0
    this.#current = 0
    this.#windowStart += windows * WINDOW_MS
  }
}
