export interface BoundedMapOptions<V> {
  maxEntries: number
  /** Upper bound of the sum of `sizeOf` over the values held. */
  maxBytes: number
  sizeOf: (value: V) => number
}

interface Slot<V> {
  value: V
  expiresAt: number
  size: number
}

/**
 * A map that never holds more than `maxEntries` values nor more than `maxBytes` (as `sizeOf` counts
 * them), evicting the least recently used first, and that forgets each value at its own `expiresAt`.
 * A Map keeps insertion order, so re-inserting on every read keeps the least recently used first.
 */
export class BoundedMap<V> {
  readonly #slots = new Map<string, Slot<V>>()
  readonly #options: BoundedMapOptions<V>
  #bytes = 0

  constructor (options: BoundedMapOptions<V>) {
    this.#options = options
  }

  get size (): number {
    return this.#slots.size
  }

  get bytes (): number {
    return this.#bytes
  }

  get (key: string, now: number): V | undefined {
    const slot = this.#slots.get(key)
    if (slot === undefined) return undefined
    this.#slots.delete(key)
    if (slot.expiresAt <= now) {
      this.#bytes -= slot.size
      return undefined
    }
    this.#slots.set(key, slot)
    return slot.value
  }

  /** Reads without refreshing recency (for bookkeeping that is not a use). */
  peek (key: string): V | undefined {
    return this.#slots.get(key)?.value
  }

  set (key: string, value: V, expiresAt: number): void {
    this.delete(key)
    const size = this.#options.sizeOf(value)
    // A value larger than the whole budget would only evict everything else and then itself.
    if (size > this.#options.maxBytes) return
    this.#slots.set(key, { value, expiresAt, size })
    this.#bytes += size
    for (const [oldest, slot] of this.#slots) {
      if (this.#slots.size <= this.#options.maxEntries && this.#bytes <= this.#options.maxBytes) break
      this.#slots.delete(oldest)
      this.#bytes -= slot.size
    }
  }

  delete (key: string): void {
    const slot = this.#slots.get(key)
    if (slot === undefined) return
    this.#slots.delete(key)
    this.#bytes -= slot.size
  }

  /** The values held (some may have passed their `expiresAt`), least recently used first. */
  * entries (): IterableIterator<[string, V]> {
    for (const [key, slot] of this.#slots) yield [key, slot.value]
  }

  clear (): void {
    this.#slots.clear()
    this.#bytes = 0
  }
}
