import type { CacheEntry } from '../cache/cache-entry.ts'
import type { Served } from '../cache/cache-stack.ts'
import { shortPrefix } from '../http/caller-input.ts'
import { errorResponse } from '../http/error-response.ts'
import { INVALID_USERNAME, PROFILE_NOT_FOUND } from '../errors.ts'
import type { User } from '../lookups/lookups.ts'
import type { ErrorResponse } from '../schemas/common.ts'
import type { ProfileField } from '../schemas/profile.ts'

/** Errors a member's own request could have been answered from a cache: they do not stop the batch being cached. */
const CACHEABLE_CODES = new Set(['INVALID_USERNAME', 'PROFILE_NOT_FOUND'])

export interface BatchBody {
  /** `{"profiles":{…},"errors":{…}}`, every username under exactly one of them, in the order asked. */
  body: string
  /** The entries it was made of (for the caching headers). */
  entries: Served[]
  /** False when a member's upstream failed: it may load next time, so this answer must not be kept. */
  cacheable: boolean
}

/**
 * The batch's JSON, written from the entries' stored bytes (no parse, no second serialization) unless
 * `fields` asks for some keys only. `answers` holds what each valid username was served or failed with;
 * a username missing from it was invalid.
 */
export function batchBody (
  usernames: readonly string[],
  answers: ReadonlyMap<string, Served | ErrorResponse>,
  fields: readonly ProfileField[] | undefined,
  userOf: (entry: CacheEntry) => User
): BatchBody {
  const profiles: string[] = []
  const errors: string[] = []
  const entries: Served[] = []
  let cacheable = true
  for (const username of usernames) {
    const answer = answers.get(username) ?? errorResponse(new INVALID_USERNAME())
    const key = JSON.stringify(username)
    if (!('entry' in answer)) {
      cacheable &&= CACHEABLE_CODES.has(answer.code)
      errors.push(`${key}:${JSON.stringify(answer)}`)
      continue
    }
    entries.push(answer)
    if (answer.entry.status === 404) {
      errors.push(`${key}:${JSON.stringify(errorResponse(new PROFILE_NOT_FOUND(shortPrefix(username))))}`)
    } else {
      profiles.push(`${key}:${fields === undefined ? answer.entry.body : JSON.stringify({ user: pick(userOf(answer.entry), fields) })}`)
    }
  }
  return { body: `{"profiles":{${profiles.join(',')}},"errors":{${errors.join(',')}}}`, entries, cacheable }
}

function pick (user: User, fields: readonly ProfileField[]): Partial<User> {
  return Object.fromEntries(fields.map((field) => [field, user[field]]))
}
