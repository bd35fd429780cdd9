import { count, mib, ms, statuses } from './format.ts'
import type { BenchResults } from './results.ts'

// The soak's section of the report (issue 32, point 8), and its goal: each kind of upstream call within its bound.

/** A sample of the RSS every this many seconds in the report (the phase takes one every 5 s). */
const RSS_EVERY_SECONDS = 30

export function soakSection ({ soak }: BenchResults): string[] {
  if (soak === undefined) return []
  const calls = Object.values(soak.calls).reduce((sum, n) => sum + n, 0)
  // The first sample of each period (a busy machine delays the 5 s timer), and the last one.
  const shown = soak.rss.samples.filter((sample, index, all) => index === all.length - 1 ||
    Math.floor(sample.atSeconds / RSS_EVERY_SECONDS) !== Math.floor((all[index - 1]?.atSeconds ?? -RSS_EVERY_SECONDS) / RSS_EVERY_SECONDS))
  return [
    '',
    `## Soak (issue 32): ${soak.seconds} s, ${count(soak.usernames)} usernames × 3 routes, wrk at ${soak.connections} connections,` +
      ` freshness ${soak.freshSeconds} s, upstream ${ms(soak.upstreamLatencyMs)}, in-process store at its default bound`,
    '',
    'One fresh instance; wrk (`bench/soak.lua`) cycles through every username on `/profile/u`, `/profile/u/timeline` and' +
      ' `/user/u?query=name` in one shuffled order. A field query is answered from the profile, so `/user` costs profile calls.' +
      ' The bound per kind of call: usernames × ceil(T / (0.9 × freshness)) + usernames (a fill, then one refresh per username' +
      ' per shortest interval between refreshes).',
    '',
    '| measure | value |',
    '|---|---:|',
    `| requests (wrk) / req/s / p50 / p99 | ${count(soak.requests)} / ${count(Math.round(soak.requestsPerSecond))} / ${ms(soak.p50Ms)} / ${ms(soak.p99Ms)} |`,
    `| wrk errors / status >= 400 | ${soak.errors} / ${count(soak.non2xx)} |`,
    ...Object.entries(soak.answers).filter(([route]) => route.startsWith('/profile') || route.startsWith('/user'))
      .map(([route, byStatus]) => `| answers of \`${route}\` (the service's count) | ${statuses(byStatus)} |`),
    ...Object.entries(soak.lookups).map(([resource, byState]) => `| ${resource} lookups by X-Cache | ${statuses(byState)} |`),
    `| upstream calls, all / share of requests answered without one | ${count(calls)} / ${(100 * (1 - calls / soak.requests)).toFixed(1)}% |`,
    `| each path asked every (3 × usernames / req/s), against the freshness of ${soak.freshSeconds} s | ${(3 * soak.usernames / soak.requestsPerSecond).toFixed(1)} s |`,
    ...Object.entries(soak.calls).map(([kind, n]) => `| upstream \`${kind}\` calls against the bound of ${count(soak.boundPerKind)} | ${count(n)} (${withinBound(n, soak.boundPerKind)}) |`),
    `| token exchanges | ${soak.tokenRequests} |`,
    `| store at the end: entries / bytes (of its bound) / fresh evictions | ${count(soak.store.entries)} / ${mib(soak.store.bytes)} (of ${mib(soak.store.maxBytes)}) / ${count(soak.store.freshEvictions)} |`,
    `| RSS before / peak (VmHWM) / at the end | ${mib(soak.rss.beforeBytes)} / ${mib(soak.rss.peakBytes)} / ${mib(soak.rss.endBytes)} |`,
    `| RSS every ${RSS_EVERY_SECONDS} s | ${shown.map((sample) => `${sample.atSeconds} s: ${(sample.rssBytes / 1024 / 1024).toFixed(0)}`).join(', ')} MiB |`,
    `| load average (1 / 5 / 15 min) at start / at the end | ${soak.loadAverage.start.map((n) => n.toFixed(2)).join(' / ')} · ${soak.loadAverage.end.map((n) => n.toFixed(2)).join(' / ')} |`
  ]
}

export function soakVerdicts ({ soak }: BenchResults): Array<{ target: string, goal: string, measured: string, pass: boolean | undefined }> {
  if (soak === undefined) return []
  const worst = Math.max(soak.calls.profile ?? 0, soak.calls.timeline ?? 0)
  return [{
    target: `soak, in-process store at its default bound (issue 32): upstream calls per kind over ${soak.seconds} s`,
    goal: `<= ${count(soak.boundPerKind)} each`,
    measured: `profile ${count(soak.calls.profile ?? 0)}, timeline ${count(soak.calls.timeline ?? 0)}, user ${count(soak.calls.user ?? 0)}; ${count(soak.store.freshEvictions)} fresh evictions`,
    pass: worst <= soak.boundPerKind && (soak.calls.user ?? 0) <= soak.boundPerKind
  }]
}

function withinBound (calls: number, bound: number): string {
  return calls <= bound ? `within, ${(100 * calls / bound).toFixed(0)}% of it` : `OVER by ${count(calls - bound)}`
}
