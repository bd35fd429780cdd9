/** How many recent calls the estimate looks at, and which of their durations it takes. */
const SAMPLES = 50
const PERCENTILE = 0.9
/** Never expect less: a call with less time left than this is not worth sending, even before anything was measured. */
const LATENCY_FLOOR_MS = 100
/** Nor more than this share of a load's time: a short UPSTREAM_TIMEOUT_MS still leaves its calls room to queue. */
const FLOOR_SHARE_OF_LOAD = 0.25

/**
 * What the upstream has been taking: the 90th percentile of its last 50 calls' durations, at least the floor
 * (LATENCY_FLOOR_MS, or a quarter of `callerLoadMs` when that is less). A queued call with less time left than this is
 * not sent, and a caller turned away from a full queue is told to come back after it (the time for the calls in flight
 * to end).
 */
export class RecentLatency {
  readonly #samples: number[] = []
  readonly #floorMs: number
  #next = 0
  #expectedMs: number

  /** `callerLoadMs`: a caller's load's whole time (LoadBudget's); absent, the floor is LATENCY_FLOOR_MS. */
  constructor (callerLoadMs = Number.POSITIVE_INFINITY) {
    this.#floorMs = Math.min(LATENCY_FLOOR_MS, FLOOR_SHARE_OF_LOAD * callerLoadMs)
    this.#expectedMs = this.#floorMs
  }

  get expectedMs (): number {
    return this.#expectedMs
  }

  record (ms: number): void {
    this.#samples[this.#next] = ms
    this.#next = (this.#next + 1) % SAMPLES
    const sorted = this.#samples.toSorted((a, b) => a - b)
    const rank = Math.ceil(PERCENTILE * sorted.length) - 1
    this.#expectedMs = Math.max(this.#floorMs, sorted[rank] ?? 0)
  }
}
