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
}

export function answerOf<T> (data: unknown, status: 200 | 304, headers: Headers): Answer<T> {
  return {
    data: data as T,
    status,
    etag: headers.get('etag') ?? undefined,
    cache: (headers.get('x-cache') ?? undefined) as CacheState | undefined,
    serverTiming: headers.get('server-timing') ?? undefined,
    requestId: headers.get('x-request-id') ?? undefined
  }
}
