import { depthAt, effectiveRps, halved, type Slowdown } from './law.ts'

export interface Taken {
  granted: number
  /** When one more call could be granted, if fewer than wanted were. */
  retryInMs: number
}

/**
 * One instance's token bucket, by the law of the fleet's (budget-script.ts) on this instance's share: `rps` calls/s,
 * `burst` deep, halved on a 429 and recovering alike. Its calls are used as soon as they are taken, so nothing is held.
 */
export class LocalBucket {
  #law: { rps: number, burst: number }
  #level: number
  #at: number
  #slowdown: Slowdown | undefined

  constructor (law: { rps: number, burst: number }, now: number) {
    this.#law = law
    this.#level = law.burst
    this.#at = now
  }

  rps (now: number): number {
    return effectiveRps(this.#law.rps, this.#slowdown, now)
  }

  /** Up to `want` calls, leaving `reserveShare` of the bucket to the classes above. */
  take (want: number, reserveShare: number, now: number): Taken {
    const at = this.#at
    const t = Math.max(now, at)
    const rps = this.rps(t)
    const room = depthAt(this.#law, rps)
    this.#level = Math.min(room, this.#level + this.rps(at) * (t - at) / 1000)
    this.#at = t
    const reserve = Math.floor(reserveShare * room)
    const granted = Math.max(0, Math.min(want, Math.floor(this.#level - reserve)))
    this.#level -= granted
    const retryInMs = granted < want ? Math.max(1, Math.ceil((reserve + 1 - this.#level) * 1000 / rps)) : 0
    return { granted, retryInMs }
  }

  /** Holds nothing from `now`: refills from there. */
  empty (now: number): void {
    this.take(0, 0, now)
    this.#level = 0
  }

  /** A new share (the fleet's count changed): what it holds is kept, within the new depth. */
  resize (law: { rps: number, burst: number }, now: number): void {
    this.take(0, 0, now)
    this.#law = law
    this.#level = Math.min(this.#level, depthAt(law, this.rps(now)))
  }

  slowDown (now: number, holdMs: number): void {
    this.#slowdown = halved(this.#law.rps, this.#slowdown, now, holdMs)
  }
}
