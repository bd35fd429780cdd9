const WINDOW_MS = 1_000

/**
 * How fast callers have been let through over the last second, and so how long a place in the line waits. A
 * sliding-window counter: this window's count and the last one's, the last weighted by how much of it still lies
 * within the second before now. Two numbers, not a list of times.
 */
export class CallerPace {
  #windowStart: number
  #current = 0
  #previous = 0

  constructor (now: number) {
    this.#windowStart = now
  }

  /** A caller was let through. */
  record (now: number): void {
    this.#roll(now)
    this.#current++
  }

  /**
   * How long the caller at `place` in the line (1: the next) can expect to wait at least: the callers ahead of it, at
   * the rate of the last second, or at `shareRps` (what the instance may expect of the budget) if that is more: a
   * second ago the budget may not have been short. At least: the next call may come at once.
   */
  waitAtMs (place: number, shareRps: number, now: number): number {
    this.#roll(now)
    const overlap = 1 - Math.max(0, now - this.#windowStart) / WINDOW_MS
    const perSecond = (this.#previous * overlap + this.#current) * 1000 / WINDOW_MS
    return (place - 1) * 1000 / Math.max(shareRps, perSecond)
  }

  #roll (now: number): void {
    const windows = Math.floor((now - this.#windowStart) / WINDOW_MS)
    if (windows <= 0) return
    this.#previous = windows === 1 ? this.#current : 0
    this.#current = 0
    this.#windowStart += windows * WINDOW_MS
  }
}
