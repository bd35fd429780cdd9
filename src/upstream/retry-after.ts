type Header = string | string[] | undefined

/** Upper bound for a Retry-After we honour, so a bogus header cannot silence us for days. */
export const MAX_RETRY_AFTER_SECONDS = 300

/**
 * An answer's Retry-After in whole seconds (given in seconds or as an HTTP date), capped; undefined when it has none we
 * can read. A date is read against the answer's own `Date` (the sender's clock, RFC 9110), else the host's wall clock:
 * never the app's steady clock, which a step of the host's clock since the start leaves apart from wall time.
 */
export function retryAfterSeconds (headers: Record<string, Header>): number | undefined {
  const value = first(headers['retry-after'])
  if (value === undefined) return undefined
  const answeredAt = Date.parse(first(headers.date) ?? '')
  const seconds = /^\d+$/.test(value.trim()) ? Number(value) : (Date.parse(value) - (Number.isNaN(answeredAt) ? Date.now() : answeredAt)) / 1000
  if (!Number.isFinite(seconds)) return undefined
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(seconds)))
}

function first (header: Header): string | undefined {
  return Array.isArray(header) ? header[0] : header
}
