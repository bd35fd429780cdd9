import { performance } from 'node:perf_hooks'
import type { FastifyReply } from 'fastify'
import type { Representation } from '../cache/cache-entry.ts'
import type { Served } from '../cache/cache-stack.ts'
import type { CacheState } from '../resources.ts'
import { shortPrefix } from './caller-input.ts'
import { preferredCoding, worthEncoding, type Coding, type EncodedBodies, type Encodings } from './encoded-bodies.ts'
import { PROFILE_NOT_FOUND, withMaxAge } from '../errors.ts'

/**
 * Turns a cache answer into HTTP: the caching headers (see setCachingHeaders), 304 when the caller
 * already holds the version served now, else `representation` of the entry (the entry itself by
 * default), compressed when the caller accepts it. A negative entry becomes PROFILE_NOT_FOUND,
 * cacheable for what is left of its freshness. An answer the cache had at once is sent at once (a
 * promise only while a large body's encodings are first made); a promised one is timed for Server-Timing, failed or not.
 */
export function serve (
  reply: FastifyReply,
  answer: Served | Promise<Served>,
  encodings: EncodedBodies,
  representation: (served: Served) => Representation = (served) => served.entry
): Promise<void> | undefined {
  if (!(answer instanceof Promise)) return send(reply, answer, encodings, representation)
  const started = performance.now()
  return answer.then(
    (served) => send(reply, served, encodings, representation, performance.now() - started),
    (error: unknown) => {
      setFailedLoadHeaders(reply, performance.now() - started)
      throw error
    })
}

/** An answer with a failed load in it: the cache had nothing to serve there (a miss, so no Age), after this long waiting. */
export function setFailedLoadHeaders (reply: FastifyReply, upstreamMs: number): void {
  reply.header('x-cache', 'MISS').removeHeader('age')
  reply.header('server-timing', `cache;desc=MISS, upstream;dur=${upstreamMs.toFixed(1)}`)
}

function send (
  reply: FastifyReply, served: Served, encodings: EncodedBodies, representation: (served: Served) => Representation, upstreamMs?: number
): Promise<void> | undefined {
  setCachingHeaders(reply, [served], upstreamMs)
  if (served.entry.status === 404) {
    const username = (reply.request.params as { username: string }).username
    throw withMaxAge(new PROFILE_NOT_FOUND(shortPrefix(username)), (served.entry.freshUntil - served.at) / 1000)
  }
  return sendRepresentation(reply, representation(served), encodings)
}

/**
 * X-Cache, Age, Server-Timing and Cache-Control for an answer made of one or more entries (a batch
 * answers as its least fresh entry). What browsers and CDNs may serve stale is bounded so that a purge
 * reaches callers within one freshness: `stale-while-revalidate` is never longer than the entry's own
 * freshness; only an origin failure (`stale-if-error`) may use the rest of the stale window, as we do.
 */
export function setCachingHeaders (reply: FastifyReply, served: readonly Served[], upstreamMs?: number): void {
  const [one] = served
  const { state, age, maxAge, staleLeft, freshness } = served.length === 1 && one !== undefined ? figuresOf(one) : combinedFigures(served)
  reply.header('x-cache', state)
  if (age !== undefined) reply.header('age', age)
  const upstream = upstreamMs !== undefined && (state === 'MISS' || state === 'BYPASS') ? `, upstream;dur=${upstreamMs.toFixed(1)}` : ''
  reply.header('server-timing', `cache;desc=${state}${upstream}`)
  const swr = Math.min(staleLeft, freshness)
  reply.header('cache-control', `public, max-age=${maxAge}, stale-while-revalidate=${swr}, stale-if-error=${staleLeft}`)
}

interface CachingFigures {
  state: CacheState
  /** Undefined when nothing came from the cache. */
  age: number | undefined
  maxAge: number
  staleLeft: number
  freshness: number
}

/** One entry's figures, in seconds: the common case, without the arrays a batch needs. */
function figuresOf ({ entry, at, state }: Served): CachingFigures {
  return {
    state,
    age: state === 'HIT' || state === 'STALE' ? wholeSeconds(at - entry.storedAt) : undefined,
    maxAge: wholeSeconds(entry.freshUntil - at),
    staleLeft: wholeSeconds(entry.staleUntil - Math.max(at, entry.freshUntil)),
    freshness: wholeSeconds(entry.freshUntil - entry.storedAt)
  }
}

/**
 * Several entries answer as their least fresh one, with the oldest age when every one came from the cache: a MISS
 * (or BYPASS) has no Age, as a single entry's, since a cache would take a partly fresh answer for an older one.
 */
function combinedFigures (served: readonly Served[]): CachingFigures {
  const each = served.map(figuresOf)
  const ages = each.flatMap(({ age }) => age === undefined ? [] : [age])
  return {
    state: worstState(each.map(({ state }) => state)),
    age: ages.length === each.length ? Math.max(...ages) : undefined,
    maxAge: Math.min(...each.map(({ maxAge }) => maxAge)),
    staleLeft: Math.min(...each.map(({ staleLeft }) => staleLeft)),
    freshness: Math.min(...each.map(({ freshness }) => freshness))
  }
}

/**
 * The body, or 304 when If-None-Match holds its tag. A body large enough to gain goes out in the
 * caller's preferred coding (br, gzip), from encodings made once per version (a promise only while
 * they are made); each coding has a tag of its own, since its bytes differ. A caller that takes neither
 * is sent the body at once: it does not wait for encodings it will not get.
 */
export function sendRepresentation (reply: FastifyReply, representation: Representation, encodings: EncodedBodies): Promise<void> | undefined {
  const { body, etag } = representation
  // Most bodies are too small to gain from encoding; a larger one's encodings are made once, then kept.
  const worth = worthEncoding(body)
  const coding = worth ? preferredCoding(reply.request.headers['accept-encoding']) : undefined
  if (worth) addVary(reply, 'accept-encoding')
  if (coding === undefined) {
    sendCoded(reply, representation)
    return
  }
  const made = encodings.peek(etag) ?? encodings.get(etag, body)
  if (made instanceof Promise) return made.then((encoded) => { sendCoded(reply, representation, encoded, coding) })
  sendCoded(reply, representation, made, coding)
}

/** The body in `coding` when its encodings were made (a failed compression sends it as it is), else as it is. */
function sendCoded (reply: FastifyReply, { body, etag }: Representation, encoded?: Encodings, coding?: Coding): void {
  const sent = encoded === undefined || coding === undefined ? undefined : { coding, bytes: encoded[coding] }
  // Decided here, after the lookup, against the version served now (not by a tag store that outlives a purge).
  const tag = sent === undefined ? etag : codedEtag(etag, sent.coding)
  reply.header('etag', tag)
  if (matchesEtag(reply.request.headers['if-none-match'], tag)) {
    reply.code(304).send()
  } else if (sent === undefined) {
    // Already JSON: sent as it is, without a second serialization.
    reply.type('application/json; charset=utf-8').send(body)
  } else {
    reply.type('application/json; charset=utf-8').header('content-encoding', sent.coding).send(sent.bytes)
  }
}

/** `"abc"` in brotli is `"abc-br"`: a tag per coding, derived from the body's. */
export function codedEtag (etag: string, coding: string): string {
  return `${etag.slice(0, -1)}-${coding}"`
}

/** Adds to Vary rather than replacing what is there (CORS may have put `Origin`). */
export function addVary (reply: FastifyReply, header: string): void {
  const current = reply.getHeader('vary')
  reply.header('vary', current === undefined ? header : `${String(current)}, ${header}`)
}

const STATE_ORDER: readonly CacheState[] = ['MISS', 'BYPASS', 'STALE', 'HIT']

/** The state of an answer made of several entries: the one that says most about how it was made. */
function worstState (states: readonly CacheState[]): CacheState {
  return STATE_ORDER.find((state) => states.includes(state)) ?? 'HIT'
}

function wholeSeconds (ms: number): number {
  return Math.max(0, Math.floor(ms / 1000))
}

/** RFC 9110: `*`, or a list of tags compared weakly (a `W/` prefix does not matter for GET). */
export function matchesEtag (header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  if (header.trim() === '*') return true
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)
}
