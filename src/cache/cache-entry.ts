import { hash } from 'node:crypto'

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

/**
 * Freshness is shortened by up to this share, at random, so that entries filled together (a page
 * listing many members, a deploy) do not all expire together. Only ever shorter: `max-age` never
 * exceeds the configured TTL.
 */
export const FRESHNESS_JITTER = 0.1

export function createEntry (
  status: 200 | 404,
  body: string,
  now: number,
  { freshMs, staleMs }: Freshness,
  random: () => number = Math.random
): CacheEntry {
  const etag = `"${hash('sha1', body, 'base64url')}"`
  const fresh = freshMs - Math.floor(freshMs * FRESHNESS_JITTER * random())
  return { status, body, etag, storedAt: now, freshUntil: now + fresh, staleUntil: now + fresh + staleMs }
}

/** A purged entry is fresh until it was stored: stale on every instance's clock, however far their estimates of Redis's drift. */
export function isFresh (entry: CacheEntry, now: number): boolean {
  return now < entry.freshUntil && entry.storedAt < entry.freshUntil
}

export function isServable (entry: CacheEntry, now: number): boolean {
  return now < entry.staleUntil
}

/** A purged entry: fresh until it was stored, still servable for the rest of its stale window. */
export function markedStale (entry: CacheEntry): CacheEntry {
  return entry.freshUntil <= entry.storedAt ? entry : { ...entry, freshUntil: entry.storedAt }
}

/** Whether two entries are the same fill (a purge changes `freshUntil`, not the version). */
export function sameVersion (a: CacheEntry, b: CacheEntry | undefined): boolean {
  return b !== undefined && a.storedAt === b.storedAt && a.etag === b.etag
}

/** Rough memory cost of an entry, for the in-process stores' byte bounds. */
export function entrySize (entry: CacheEntry): number {
  return entry.body.length + entry.etag.length + 64
}

/** A body as sent, and the tag that names this version of it: an entry, or a part of one (a field). */
export type Representation = Pick<CacheEntry, 'body' | 'etag'>
