import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { roundFigures, wrkSummary, type WrkSummary } from './load.ts'
import { sampleValues } from './metrics.ts'
import type { ProcessGroup } from './processes.ts'
import { simulatorCounts } from './requests.ts'
import { startService, startSimulator } from './targets.ts'

// Issue 32's soak (point 8): one instance on its in-process store at the default bound (CACHE_MEMORY_MB), a set of
// usernames over the three data routes for minutes, driven by wrk (bench/soak.lua: every username on every route, in
// one shuffled order, cycling), against a fast upstream and a short freshness. Reported: the upstream calls by kind
// against their bound (a fill, then one call per username per shortest refresh interval), the store's gauges, the RSS.

const SCRIPT = fileURLToPath(new URL('soak.lua', import.meta.url))
const HIT_SCRIPT = fileURLToPath(new URL('wrk.lua', import.meta.url))
/** The refresh-ahead starts at nine tenths of the configured freshness (src/cache/refresh-ahead.ts); jitter never shortens it below that. */
const REFRESH_SHARE = 0.9
const RSS_SAMPLE_MS = 5_000

export interface SoakSettings {
  seconds: number
  usernames: number
  connections: number
  freshSeconds: number
  upstreamLatencyMs: number
}

export interface SoakResult extends SoakSettings {
  /** What wrk counted. */
  requests: number
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  errors: number
  non2xx: number
  /** The service's own count of answers, by route and status. */
  answers: Record<string, Record<string, number>>
  /** Cache lookups by resource and X-Cache state. */
  lookups: Record<string, Record<string, number>>
  /** Upstream data calls by kind (`profile`, `timeline`, `user`), and token exchanges. */
  calls: Record<string, number>
  tokenRequests: number
  /** The bound on each kind's calls: usernames × ceil(T / (0.9 × freshness)) + usernames. */
  boundPerKind: number
  store: { entries: number, bytes: number, maxBytes: number, freshEvictions: number }
  rss: { beforeBytes: number, peakBytes: number, endBytes: number, samples: Array<{ atSeconds: number, rssBytes: number }> }
  loadAverage: { start: number[], end: number[] }
}

export async function soakPhase (
  { group, logLevel, settings, log }: { group: ProcessGroup, logLevel: string, settings: SoakSettings, log: (line: string) => void }
): Promise<SoakResult> {
  const { seconds, usernames, connections, freshSeconds, upstreamLatencyMs } = settings
  const loadStart = loadavg()
  log(`soak: ${seconds} s, ${usernames} usernames × 3 routes, wrk at ${connections} connections, freshness ${freshSeconds} s,` +
    ` upstream ${upstreamLatencyMs} ms, one instance on its in-process store (load average ${loadStart.map((n) => n.toFixed(2)).join(' / ')})`)
  const simulator = await startSimulator(group, upstreamLatencyMs, 'simulator-soak')
  const service = await startService(group, {
    name: 'service-soak',
    simulator,
    logLevel,
    env: { PROFILE_TTL_SECONDS: String(freshSeconds), TIMELINE_TTL_SECONDS: String(freshSeconds) }
  })
  try {
    const beforeBytes = service.rss() ?? Number.NaN
    const samples: SoakResult['rss']['samples'] = []
    const started = Date.now()
    const sampler = setInterval(() => { samples.push({ atSeconds: Math.round((Date.now() - started) / 1000), rssBytes: service.rss() ?? Number.NaN }) }, RSS_SAMPLE_MS)
    let summary
    try {
      summary = await runSoakWrk(service.url, { connections, seconds, usernames })
    } finally {
      clearInterval(sampler)
    }
    const memory = service.memory()
    const figures = roundFigures(summary)
    const counts = await simulatorCounts(simulator.url)
    const calls: Record<string, number> = { profile: 0, timeline: 0, user: 0 }
    for (const [key, n] of Object.entries(counts.calls)) {
      const kind = key.slice(0, key.indexOf(':'))
      calls[kind] = (calls[kind] ?? 0) + n
    }
    const metrics = await fetch(`${service.url}/metrics`).then(async (response) => await response.text())
    const gauge = (name: string): number => sampleValues(metrics, `pbff_memory_store_${name}`)[0]?.value ?? Number.NaN
    const actualSeconds = summary.durationUs / 1e6
    return {
      ...settings,
      requests: figures.responses,
      requestsPerSecond: figures.requestsPerSecond,
      p50Ms: figures.p50Ms,
      p99Ms: figures.p99Ms,
      errors: figures.errors,
      non2xx: figures.non2xx,
      answers: byTwoLabels(metrics, 'pbff_http_requests_total', 'route', 'status'),
      lookups: byTwoLabels(metrics, 'pbff_cache_lookups_total', 'resource', 'state'),
      calls,
      tokenRequests: counts.tokenRequests,
      boundPerKind: usernames * Math.ceil(actualSeconds / (REFRESH_SHARE * freshSeconds)) + usernames,
      store: { entries: gauge('entries'), bytes: gauge('bytes'), maxBytes: gauge('max_bytes'), freshEvictions: gauge('fresh_evictions_total') },
      rss: { beforeBytes, peakBytes: memory?.peakRssBytes ?? Number.NaN, endBytes: memory?.rssBytes ?? Number.NaN, samples },
      loadAverage: { start: loadStart, end: loadavg() }
    }
  } finally {
    await service.stop()
    await simulator.stop()
  }
}

/** Sums of a counter's samples by two of its labels, e.g. answers by route and status. */
function byTwoLabels (metrics: string, name: string, outer: string, inner: string): Record<string, Record<string, number>> {
  const sums: Record<string, Record<string, number>> = {}
  for (const { labels, value } of sampleValues(metrics, name)) {
    const a = labels[outer]
    const b = labels[inner]
    if (a === undefined || b === undefined) continue
    const row = sums[a] ?? (sums[a] = {})
    row[b] = (row[b] ?? 0) + value
  }
  return sums
}

/** wrk (one thread) with bench/soak.lua for `seconds` (stopped with the benchmark, as every load is). */
async function runSoakWrk (url: string, { connections, seconds, usernames }: { connections: number, seconds: number, usernames: number }): Promise<WrkSummary> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', SCRIPT, url, '--', 'soak-', String(usernames), '32']
  return await wrkSummary(args, { PBFF_WRK_LUA: HIT_SCRIPT, PBFF_WRK_DELAY_MS: '0' })
}
