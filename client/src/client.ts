import { answerOf, type Answer } from './answer.ts'
import { batchPaths, mergedAnswer } from './batch.ts'
import type { BatchBody, FieldBody, FieldQuery, ProfileBody, TimelineBody } from './bodies.ts'
import { assertValidOptions, type ClientOptions } from './client-options.ts'
import { ProfileBffError, type ErrorCode } from './errors.ts'
import { assertWellFormed, usernameSegment } from './username.ts'

/**
 * An aborted call rejects with the signal's reason (an `AbortError` DOMException unless given another), never with
 * NETWORK_ERROR, so that a cancellation or a timeout can be told from an outage.
 */
export interface CallOptions { signal?: AbortSignal }

/**
 * The routes as functions. Every call revalidates the version it holds (If-None-Match) and throws ProfileBffError when not 200/304;
 * a username that cannot reach the service intact (`.` or `..` on a path, a lone surrogate) throws INVALID_USERNAME before any request.
 */
export interface ProfileBffClient {
  profile: (username: string, options?: CallOptions) => Promise<Answer<ProfileBody>>
  timeline: (username: string, options?: CallOptions) => Promise<Answer<TimelineBody>>
  field: (username: string, query: FieldQuery, options?: CallOptions) => Promise<Answer<FieldBody>>
  /**
   * Each distinct username lands under `data.profiles` or `data.errors`. Over 50 of them (or over about 7,000 octets of
   * query) are sent as several batches in parallel, merged into one answer: 304 only when every batch was, `cache` and
   * `cacheControl` the least fresh batch's, `etag` undefined, `serverTiming` and `requestId` theirs joined by `, ` (the
   * rest: mergedAnswer). One batch answers as it is.
   */
  profiles: (usernames: readonly string[], options?: CallOptions & { fields?: readonly FieldQuery[] }) => Promise<Answer<BatchBody>>
}

/** The body's text, not its parse: each answer gets a fresh copy, so a caller editing its data changes no later answer. */
interface Held { etag: string, text: string }

/** Throws a TypeError for an option that would remove a bound (a `maxHeld` or `timeoutMs` that is NaN, infinite or negative). */
export function createClient (options: ClientOptions): ProfileBffClient {
  assertValidOptions(options)
  const { baseUrl, fetch: fetchFn = globalThis.fetch.bind(globalThis), maxHeld = 500, timeoutMs } = options
  const base = baseUrl.replace(/\/+$/, '')
  const held = new Map<string, Held>()

  async function get<T> (path: string, { signal: callerSignal }: CallOptions = {}): Promise<Answer<T>> {
    const url = `${base}${path}`
    const signal = signalOf(callerSignal, timeoutMs)
    const known = held.get(url)
    const headers: Record<string, string> = { accept: 'application/json' }
    if (known !== undefined) headers['if-none-match'] = known.etag
    let response: Response
    try {
      // No cookies: the service holds no session, and `*` CORS answers refuse credentialed requests.
      response = await fetchFn(url, { headers, credentials: 'omit', signal })
    } catch (error) {
      signal?.throwIfAborted()
      throw new ProfileBffError('NETWORK_ERROR', 0, 'The service could not be reached', undefined, { cause: error })
    }
    if (response.status === 304 && known !== undefined) {
      remember(url, known)
      return answerOf(JSON.parse(known.text), 304, response.headers)
    }
    const text = await response.text().catch(() => '')
    // A body cut short by the signal is a cancellation, not an answer that is not JSON.
    signal?.throwIfAborted()
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
    profile: async (username, options) => await get(`/profile/${usernameSegment(username)}`, options),
    timeline: async (username, options) => await get(`/profile/${usernameSegment(username)}/timeline`, options),
    field: async (username, query, options) => await get(`/user/${usernameSegment(username)}?query=${encodeURIComponent(query)}`, options),
    profiles: async (usernames, { fields, ...options } = {}) => {
      for (const username of usernames) assertWellFormed(username)
      return mergedAnswer(await Promise.all(batchPaths(usernames, fields).map(async (path) => await get<BatchBody>(path, options))))
    }
  }
}

/** The caller's signal and the client's timeout as one; undefined when neither is set. */
function signalOf (signal: AbortSignal | undefined, timeoutMs: number | undefined): AbortSignal | undefined {
  const timeout = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)
  if (signal === undefined || timeout === undefined) return signal ?? timeout
  return AbortSignal.any([signal, timeout])
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
