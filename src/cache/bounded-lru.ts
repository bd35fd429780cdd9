import { LRUCache } from 'lru-cache'

export interface BoundedLruOptions<V> {
  /** At most this many values; absent: no count cap (lru-cache then grows its slots as values come, rather than allocating them all up front). */
  maxEntries?: number
  /** Upper bound of the sum of `sizeOf` over the values held (a larger value is not kept at all). */
  maxBytes?: number
  sizeOf?: (value: V, key: string) => number
  /** A value pushed out by a bound (not one expired, replaced or deleted). */
  onEvict?: (value: V, key: string) => void
  now: () => number
}

/** Least recently used out first past either bound; each value expires on the given clock. */
export function boundedLru<V extends NonNullable<unknown>> ({ maxEntries, maxBytes, sizeOf, onEvict, now }: BoundedLruOptions<V>): LRUCache<string, V> {
  return new LRUCache<string, V>({
    // 0: no count cap.
    max: maxEntries ?? 0,
    ...(maxBytes !== undefined && sizeOf !== undefined && { maxSize: maxBytes, sizeCalculation: sizeOf }),
    ...(onEvict !== undefined && { dispose: (value, key, reason) => { if (reason === 'evict') onEvict(value, key) } }),
    perf: { now },
    // Its default caches the time for 1 ms on a real timer, which a moved clock would not see.
    ttlResolution: 0
  })
}

/** Holds `value` until `expiresAt` (gone at that instant: lru-cache keeps an entry while its age is at most its ttl). */
export function setUntil<V extends NonNullable<unknown>> (lru: LRUCache<string, V>, key: string, value: V, expiresAt: number): void {
  const now = lru.perf.now()
  if (expiresAt <= now) {
    lru.delete(key)
    return
  }
  lru.set(key, value, { ttl: expiresAt - now, start: now - 1 })
}
