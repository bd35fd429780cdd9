/** The service's per-client budget, from `X-RateLimit-*`. */
export interface RateLimit {
  /** Requests (a batch: usernames) allowed a minute. */
  limit: number
  /** What is left of them this minute. */
  remaining: number
  /** Seconds until the budget is renewed. */
  reset: number
}

/** A header holding a number; undefined when absent or not a number. */
export function numberHeader (headers: Headers | undefined, name: string): number | undefined {
  const value = headers?.get(name)
  if (value === null || value === undefined || value.trim() === '') return undefined
  const number = Number(value)
  return Number.isFinite(number) ? number : undefined
}

/** Undefined unless all three headers are there (the rate limit is off, or the answer came from elsewhere). */
export function rateLimitOf (headers: Headers | undefined): RateLimit | undefined {
  const limit = numberHeader(headers, 'x-ratelimit-limit')
  const remaining = numberHeader(headers, 'x-ratelimit-remaining')
  const reset = numberHeader(headers, 'x-ratelimit-reset')
  return limit === undefined || remaining === undefined || reset === undefined ? undefined : { limit, remaining, reset }
}
