import { answerOf, type Answer } from './answer.ts'
import { batchPaths, mergedAnswer } from './batch.ts'
import type { BatchBody, FieldBody, FieldQuery, ProfileBody, TimelineBody } from './bodies.ts'
import { ProfileBffError, type ErrorCode } from './errors.ts'
import { assertWellFormed, usernameSegment } from './username.ts'

export interface ClientOptions {
  /** Where the service answers, e.g. `https://profiles.example` (a path prefix is kept). */
  baseUrl: string
  /** Default: the global fetch (browsers, Node 18+). */
  fetch?: typeof fetch
  /** Versions kept for ETag revalidation (the least recently used go first); 0 turns revalidation off. */
  maxHeld?: number
}

/**
 * The routes as functions. Every call revalidates the version it holds (If-None-Match) and throws ProfileBffError when not 200/304;
 * a username that cannot reach the service intact (`.` or `..` on a path, a lone surrogate) throws INVALID_USERNAME before any request.
 */
export interface ProfileBffClient {
  profile: (username: string) => Promise<Answer<ProfileBody>>
  timeline: (username: string) => Promise<Answer<TimelineBody>>
  field: (username: string, query: FieldQuery) => Promise<Answer<FieldBody>>
  /**
   * Each distinct username lands under `data.profiles` or `data.errors`. Over 50 of them (or over about 7,000 octets of
   * query) are sent as several batches in parallel, merged into one answer: 304 only when every batch was, `cache` the
   * least fresh of theirs, `etag` undefined, `serverTiming` and `requestId` theirs joined by `, `. One batch answers as it is.
   */
  profiles: (usernames: readonly string[], options?: { fields?: readonly FieldQuery[] }) => Promise<Answer<BatchBody>>
}

/** The body's text, not its parse: each answer gets a fresh copy, so a caller editing its data changes no later answer. */
interface Held { etag: string, text: string }

export function createClient ({ baseUrl, fetch: fetchFn = globalThis.fetch.bind(globalThis), maxHeld = 500 }: ClientOptions): ProfileBffClient {
  const base = baseUrl.replace(/\/+$/, '')
  const held = new Map<string, Held>()

  async function get<T> (path: string): Promise<Answer<T>> {
    const url = `${base}${path}`
    const known = held.get(url)
    const headers: Record<string, string> = { accept: 'application/json' }
    if (known !== undefined) headers['if-none-match'] = known.etag
    let response: Response
    try {
      // No cookies: the service holds no session, and `*` CORS answers refuse credentialed requests.
      response = await fetchFn(url, { headers, credentials: 'omit' })
    } catch (error) {
      throw new ProfileBffError('NETWORK_ERROR', 0, 'The service could not be reached', undefined, { cause: error })
    }
    if (response.status === 304 && known !== undefined) {
      remember(url, known)
      return answerOf(JSON.parse(known.text), 304, response.headers)
    }
    const text = await response.text().catch(() => '')
    const body = jsonOf(text)
    if (response.status !== 200) throw errorOf(response, body)
    if (body === undefined) throw new ProfileBffError('UNEXPECTED_RESPONSE', 200, 'The answer is not JSON', response.headers)
    const etag = response.headers.get('etag')
    if (etag !== null) remember(url, { etag, text })
    return answerOf(body, 200, response.headers)
  }

  function remember (url: string, version: Held): void {
    if (maxHeld === 0) return
    held.delete(url)
    held.set(url, version)
    if (held.size > maxHeld) held.delete(held.keys().next().value as string)
  }

  return {
    profile: async (username) => await get(`/profile/${usernameSegment(username)}`),
    timeline: async (username) => await get(`/profile/${usernameSegment(username)}/timeline`),
    field: async (username, query) => await get(`/user/${usernameSegment(username)}?query=${encodeURIComponent(query)}`),
    profiles: async (usernames, { fields } = {}) => {
      for (const username of usernames) assertWellFormed(username)
      return mergedAnswer(await Promise.all(batchPaths(usernames, fields).map(async (path) => await get<BatchBody>(path))))
    }
  }
}

function jsonOf (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function errorOf (response: Response, body: unknown): ProfileBffError {
  const error = body as { code?: unknown, message?: unknown } | undefined
  if (typeof error?.code !== 'string') {
    return new ProfileBffError('UNEXPECTED_RESPONSE', response.status, `The service answered ${response.status}`, response.headers)
  }
  return new ProfileBffError(error.code as ErrorCode, response.status, String(error.message ?? ''), response.headers)
}
