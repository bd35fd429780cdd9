import type { FastifyReply } from 'fastify'
import type { Served } from '../cache/swr-cache.js'
import { PROFILE_NOT_FOUND } from '../errors.js'

/**
 * Turns a cache answer into HTTP: X-Cache, Age, Cache-Control with what is left of freshness, the
 * ETag, and 304 when the caller already holds the version served now. Returns the bytes to send,
 * untouched. A negative entry becomes PROFILE_NOT_FOUND, cacheable for what is left of its freshness.
 */
export function serveCached (reply: FastifyReply, served: Served, body = served.entry.body, etag = served.entry.etag): FastifyReply {
  const { request } = reply
  const { entry, state, at } = served
  reply.header('x-cache', state)
  if (state === 'HIT' || state === 'STALE') reply.header('age', wholeSeconds(at - entry.storedAt))
  const maxAge = wholeSeconds(entry.freshUntil - at)
  if (entry.status === 404) {
    reply.header('cache-control', `public, max-age=${maxAge}`)
    throw new PROFILE_NOT_FOUND((request.params as { username: string }).username)
  }
  const staleWindow = wholeSeconds(entry.staleUntil - Math.max(at, entry.freshUntil))
  reply.header('cache-control', `public, max-age=${maxAge}, stale-while-revalidate=${staleWindow}`)
  // Lifetime 0: @fastify/caching remembers no tag (see NO_TAG_STORE in routes/profiles.ts).
  reply.etag(etag, 0)
  if (matchesEtag(request.headers['if-none-match'], etag)) return reply.code(304).send()
  // Already JSON: sent as it is, without a second serialization.
  return reply.type('application/json; charset=utf-8').send(body)
}

function wholeSeconds (ms: number): number {
  return Math.max(0, Math.floor(ms / 1000))
}

/** RFC 9110: `*`, or a list of tags compared weakly (a `W/` prefix does not matter for GET). */
function matchesEtag (header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  if (header.trim() === '*') return true
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)
}
