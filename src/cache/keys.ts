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

/** Remembers a purge for loads that started before it: same hash tag, so the same shard as the entry. */
export function purgedKey (key: string): string {
  return `${key}:purged`
}

/** The pub/sub channel on which the instances of one deployment tell each other about entries. */
export function eventsChannel (prefix: string): string {
  return `${prefix}${SCHEMA_VERSION}:events`
}
