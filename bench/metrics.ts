import { request } from 'undici'

// What a service instance says about itself on /metrics (its Prometheus text), read by the benchmark between
// measured windows: what it answered (wrk sees statuses only as "400 or more"), and its live heap.

/** The data route the hit path drives. */
const ROUTE = '/profile/:username'

/** Answers of the profile route by status, and profile lookups by cache state (the X-Cache a single profile answers with), counted by the service itself. */
export interface CacheResults {
  statuses: Record<string, number>
  xCache: Record<string, number>
}

export async function cacheResults (url: string): Promise<CacheResults> {
  return parseCacheResults(await metricsText(url))
}

/** V8's heap in use (prom-client's `nodejs_heap_size_used_bytes`), in bytes; undefined when not exported. */
export async function heapUsedBytes (url: string): Promise<number | undefined> {
  return sampleValues(await metricsText(url), 'nodejs_heap_size_used_bytes')[0]?.value
}

export function parseCacheResults (text: string, route = ROUTE): CacheResults {
  const statuses: Record<string, number> = {}
  const xCache: Record<string, number> = {}
  for (const { labels, value } of sampleValues(text, 'pbff_http_requests_total')) {
    if (labels.route === route && labels.status !== undefined) statuses[labels.status] = (statuses[labels.status] ?? 0) + value
  }
  for (const { labels, value } of sampleValues(text, 'pbff_cache_lookups_total')) {
    if (labels.resource === 'profile' && labels.state !== undefined) xCache[labels.state] = (xCache[labels.state] ?? 0) + value
  }
  return { statuses, xCache }
}

/** `after` less `before`, value by value: what was counted in between. Values that did not move are left out. */
export function countedBetween (before: CacheResults, after: CacheResults): CacheResults {
  const minus = (a: Record<string, number>, b: Record<string, number>): Record<string, number> =>
    Object.fromEntries(Object.entries(a).map(([key, n]): [string, number] => [key, n - (b[key] ?? 0)]).filter(([, n]) => n !== 0))
  return { statuses: minus(after.statuses, before.statuses), xCache: minus(after.xCache, before.xCache) }
}

/** Every sample of one metric in the text format, with its labels. */
export function sampleValues (text: string, name: string): Array<{ labels: Record<string, string>, value: number }> {
  const samples: Array<{ labels: Record<string, string>, value: number }> = []
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || (line[name.length] !== '{' && line[name.length] !== ' ')) continue
    const match = /^[^{ ]+(?:\{(.*)\})? (\S+)/.exec(line)
    if (match === null) continue
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[1] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key as string] = value as string
    samples.push({ labels, value: Number(match[2]) })
  }
  return samples
}

async function metricsText (url: string): Promise<string> {
  const response = await request(`${url}/metrics`, { headersTimeout: 10_000, bodyTimeout: 10_000 })
  const text = await response.body.text()
  if (response.statusCode !== 200) throw new Error(`${url}/metrics answered ${response.statusCode}`)
  return text
}
