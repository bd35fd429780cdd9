import { numberHeader, rateLimitOf, type RateLimit } from './header-values.ts'
import type { operations } from './openapi.ts'

export type CacheState = NonNullable<operations['getProfile']['responses'][200]['headers']['x-cache']>

/** An answer: its body, and what the caching headers said about it. */
export interface Answer<T> {
  data: T
  /** 304: the version held here was still current; `data` is that version. */
  status: 200 | 304
  etag: string | undefined
  cache: CacheState | undefined
  serverTiming: string | undefined
  requestId: string | undefined
  /** `Age`: seconds since the service loaded this entry from the upstream (absent on a MISS). */
  age: number | undefined
  /** `Cache-Control`: how long this answer may be reused, and served stale. */
  cacheControl: string | undefined
  /** `X-RateLimit-*`: this client's budget (absent when the service limits no one). */
  rateLimit: RateLimit | undefined
}

export function answerOf<T> (data: unknown, status: 200 | 304, headers: Headers): Answer<T> {
  return {
    data: data as T,
    status,
    etag: headers.get('etag') ?? undefined,
    cache: (headers.get('x-cache') ?? undefined) as CacheState | undefined,
    serverTiming: headers.get('server-timing') ?? undefined,
    requestId: headers.get('x-request-id') ?? undefined,
    age: numberHeader(headers, 'age'),
    cacheControl: headers.get('cache-control') ?? undefined,
    rateLimit: rateLimitOf(headers)
  }
}
