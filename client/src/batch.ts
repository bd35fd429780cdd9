import type { Answer, CacheState } from './answer.ts'
import type { BatchBody, FieldQuery } from './bodies.ts'

/** The service refuses a batch of more than 50 distinct usernames (400 INVALID_BATCH). */
const MAX_USERNAMES = 50
/** The service refuses a request line over 8,000 octets (414): this leaves room for the method, a base path and `fields`. */
const MAX_QUERY_OCTETS = 7000
/** Least fresh first: a merged batch is as fresh as its least fresh part, as the service's own batch is. */
const FRESHNESS: readonly CacheState[] = ['MISS', 'BYPASS', 'STALE', 'HIT']

/** The `/profiles?…` paths for these usernames: distinct, at most 50 and about 7,000 octets of query each (one, even for none). */
export function batchPaths (usernames: readonly string[], fields: readonly FieldQuery[] | undefined): string[] {
  const fieldsParam = fields !== undefined && fields.length > 0 ? new URLSearchParams({ fields: fields.join(',') }).toString() : undefined
  const queryOf = (params: string[]): string => (fieldsParam === undefined ? params : [...params, fieldsParam]).join('&')
  const chunks: string[][] = []
  let chunk: string[] = []
  for (const username of new Set(usernames)) {
    const param = new URLSearchParams({ username }).toString()
    if (chunk.length > 0 && (chunk.length === MAX_USERNAMES || queryOf([...chunk, param]).length > MAX_QUERY_OCTETS)) {
      chunks.push(chunk)
      chunk = []
    }
    chunk.push(param)
  }
  chunks.push(chunk)
  return chunks.map((params) => `/profiles?${queryOf(params)}`)
}

/**
 * One answer of several batches: every profile and error; 304 only when all were; no `etag`; `cache` and `cacheControl`
 * the least fresh batch's, the largest `age`; `rateLimit` the one with the least remaining (the latest count).
 */
export function mergedAnswer (answers: ReadonlyArray<Answer<BatchBody>>): Answer<BatchBody> {
  const [only] = answers
  if (only !== undefined && answers.length === 1) return only
  const freshness = ({ cache }: Answer<BatchBody>): number => cache === undefined ? FRESHNESS.length : FRESHNESS.indexOf(cache)
  const leastFresh = answers.reduce((least, answer) => freshness(answer) < freshness(least) ? answer : least)
  const ages = answers.flatMap(({ age }) => age === undefined ? [] : [age])
  const [latestRateLimit] = answers.flatMap(({ rateLimit }) => rateLimit === undefined ? [] : [rateLimit])
    .sort((one, other) => one.remaining - other.remaining)
  const joined = (values: Array<string | undefined>): string | undefined => values.some((value) => value !== undefined)
    ? values.filter((value) => value !== undefined).join(', ')
    : undefined
  return {
    data: {
      profiles: Object.assign({}, ...answers.map(({ data }) => data.profiles)),
      errors: Object.assign({}, ...answers.map(({ data }) => data.errors))
    },
    status: answers.every(({ status }) => status === 304) ? 304 : 200,
    // No one ETag stands for several versions; each batch's own is still sent back by the next call.
    etag: undefined,
    cache: leastFresh.cache,
    serverTiming: joined(answers.map(({ serverTiming }) => serverTiming)),
    requestId: joined(answers.map(({ requestId }) => requestId)),
    age: ages.length === 0 ? undefined : Math.max(...ages),
    cacheControl: leastFresh.cacheControl,
    rateLimit: latestRateLimit
  }
}
