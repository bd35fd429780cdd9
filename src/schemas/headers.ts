import type { TSchema } from '@sinclair/typebox'

/** A response header as @fastify/swagger reads it from a response schema's `headers`. */
interface HeaderDoc {
  type: 'string' | 'integer'
  description: string
  enum?: string[]
}

const requestId: HeaderDoc = { type: 'string', description: 'this request\'s id, to quote when asking about it (the caller\'s own, when it sent a plausible one)' }

const rateLimit: Record<string, HeaderDoc> = {
  'x-ratelimit-limit': { type: 'integer', description: 'requests (a batch: usernames) allowed per client address per minute' },
  'x-ratelimit-remaining': { type: 'integer', description: 'what is left of that budget in this minute' },
  'x-ratelimit-reset': { type: 'integer', description: 'seconds until the budget is renewed' }
}

/** Headers of an answer served through the cache (200, and 304 where no body is sent). */
export const CACHED_HEADERS: Record<string, HeaderDoc> = {
  'x-cache': { type: 'string', enum: ['HIT', 'MISS', 'STALE', 'BYPASS'], description: 'how the cache answered (a batch: its least fresh entry)' },
  'cache-control': {
    type: 'string',
    description: '`public, max-age=<freshness left>, stale-while-revalidate=<at most the freshness>, stale-if-error=<stale window left>`'
  },
  etag: { type: 'string', description: 'this version of the body, in this encoding: send it back as `If-None-Match`' },
  age: { type: 'integer', description: 'seconds since the entry was loaded from the upstream (absent on MISS)' },
  'server-timing': { type: 'string', description: '`cache;desc=<X-Cache>`, and `upstream;dur=<ms>` when the answer waited for the upstream' },
  vary: { type: 'string', description: '`accept-encoding` when the body is large enough to be sent compressed' },
  'content-encoding': { type: 'string', enum: ['br', 'gzip'], description: 'present when the body is compressed' },
  'x-request-id': requestId,
  ...rateLimit
}

/** Headers of an error answer. */
export const ERROR_HEADERS: Record<string, HeaderDoc> = {
  'cache-control': { type: 'string', description: '`no-store`, except 404: `public, max-age=<seconds>`' },
  'retry-after': { type: 'integer', description: 'seconds to wait (429 and 503 only)' },
  'x-request-id': requestId,
  ...rateLimit
}

/** A response schema with its headers documented; any `$id` dropped, so that the copy is never a second definition. */
export function withHeaders<T extends TSchema> (schema: T, headers: Record<string, HeaderDoc>): T {
  const documented: TSchema = { ...schema, headers }
  delete documented.$id
  return documented as T
}
