import type { Resource } from '../resources.ts'

/**
 * Bump when the shape of a cached body changes: a deploy then reads none of the old-shaped entries.
 */
const SCHEMA_VERSION = 'v1'

/**
 * `<prefix>v1:{<username>}:<kind>`. The braces are a Redis Cluster hash tag: one username's entries
 * and locks land on one shard. The username is percent-encoded so that no character of it (a brace, a
 * colon) can change the key's structure.
 */
export function cacheKey (prefix: string, kind: Resource, username: string): string {
  return `${prefix}${SCHEMA_VERSION}:{${encodeURIComponent(username)}}:${kind}`
}

/**
 * The key's purge mark, for loads that started before the purge: same hash tag, so the same shard as the
 * entry. Not `:purged`, where the previous release kept a purge time and would fail to compare a mark.
 */
export function purgeMarkKey (key: string): string {
  return `${key}:purge`
}

/** The key's hold after a failed revalidation (see RevalidationHolds): same hash tag as the entry and its lock. */
export function retryMarkKey (key: string): string {
  return `${key}:retry`
}

/** The pub/sub channel on which the instances of one deployment tell each other about entries. */
export function eventsChannel (prefix: string): string {
  return `${prefix}${SCHEMA_VERSION}:events`
}
