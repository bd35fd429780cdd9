/** A seeded PRNG (mulberry32): the same seed draws the same schedule. */
export class Prng {
  #state: number

  constructor (seed: number) {
    this.#state = seed >>> 0
  }

  /** A float in [0, 1). */
  next (): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0
    let value = this.#state
    value = Math.imul(value ^ (value >>> 15), value | 1)
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61)
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296
  }

  /** An integer in [min, max]. */
  int (min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }

  pick<T> (list: readonly T[]): T {
    const item = list[Math.floor(this.next() * list.length)]
    if (item === undefined) throw new Error('pick from an empty list')
    return item
  }

  chance (probability: number): boolean {
    return this.next() < probability
  }
}
