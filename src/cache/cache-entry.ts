import { createHash } from 'node:crypto'

/**
 * What the cache stores for one key: the response body already serialized (a hit sends these bytes
 * as they are), its ETag computed once, and the entry's logical times. Physical expiry in a store is
 * `staleUntil`; freshness is decided here, from `freshUntil`, never from the store's TTL.
 */
export interface CacheEntry {
  /** 200: a body to serve; 404: the upstream has no such member (negative entry, empty body). */
  status: 200 | 404
  body: string
  etag: string
  storedAt: number
  freshUntil: number
  staleUntil: number
}

export interface Freshness {
  freshMs: number
  staleMs: number
}

export function createEntry (status: 200 | 404, body: string, now: number, { freshMs, staleMs }: Freshness): CacheEntry {
  const etag = `"${createHash('sha1').update(body).digest('base64url')}"`
  return { status, body, etag, storedAt: now, freshUntil: now + freshMs, staleUntil: now + freshMs + staleMs }
}

export function isFresh (entry: CacheEntry, now: number): boolean {
  return now < entry.freshUntil
}

export function isServable (entry: CacheEntry, now: number): boolean {
  return now < entry.staleUntil
}
