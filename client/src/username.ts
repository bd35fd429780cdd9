import { ProfileBffError } from './errors.ts'

// The service's own message: the client refuses only what would not reach it intact.
const SERVICE_RULE = 'username must be 1 to 128 characters, not "." or "..", without control characters'
/** Resolved as dot segments by fetch's URL parser, even percent-encoded: they would reach another route. */
const DOT_SEGMENTS = new Set(['.', '..'])
/** A surrogate outside a pair (with `u`, a pair is one code point and does not match). */
const LONE_SURROGATE = /\p{Cs}/u

/** Throws INVALID_USERNAME for a lone surrogate: encodeURIComponent throws on it, and URLSearchParams sends U+FFFD, another username. */
export function assertWellFormed (username: string): void {
  if (LONE_SURROGATE.test(username)) throw new ProfileBffError('INVALID_USERNAME', 400, `${SERVICE_RULE}, and well-formed UTF-16`)
}

/** The username as one path segment; INVALID_USERNAME, before any request, for what cannot travel as one. */
export function usernameSegment (username: string): string {
  if (DOT_SEGMENTS.has(username)) throw new ProfileBffError('INVALID_USERNAME', 400, SERVICE_RULE)
  assertWellFormed(username)
  return encodeURIComponent(username)
}
