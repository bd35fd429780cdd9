import { callerShares, type BusiestWindow, type Outcomes } from './budget-load.ts'
import { count, ms, statuses } from './format.ts'
import type { Verdict } from './report.ts'

// The budget phase (issue 25 point 6): what it measured, its section of the report, and its three targets.

export interface BudgetResult {
  instances: number
  maxRps: number
  burst: number
  profileTtlSeconds: number
  /** The callers' deadline (UPSTREAM_TIMEOUT_MS). */
  deadlineMs: number
  upstreamLatencyMs: number
  /** From the first request to the last answer, in s (requests are sent for BENCH_BUDGET_SECONDS, answered up to a deadline later). */
  seconds: number
  /** CPU each instance used over the load, in cores. */
  instanceCores: number[]
  /** The load generator's CPU (cores) and its event loop's delay, p99 and max: included in every latency it measured. */
  generator: { cores: number, lagP99Ms: number, lagMaxMs: number }
  zipf: { usernames: number, exponent: number, connections: number, result: Outcomes }
  hot: { usernames: number, intervalMs: number, result: Outcomes }
  upstream: {
    /** Data calls the simulator counted from the load's start until the background work after the last answer. */
    calls: number
    /** The most calls in any 1-second window, from each call's arrival time at the simulator. */
    busiest: BusiestWindow
    /** Calls in each whole second from the first call, in order. */
    perSecond: number[]
  }
  /** Summed over the instances, from their /metrics (pbff_upstream_budget_*), over the same span. */
  classes: { calls: Record<string, number>, deferred: Record<string, number>, dropped: Record<string, number> }
  /** Samples of pbff_redis_up (one a second), and how many of them each instance answered with Redis down. */
  redisDown: { samples: number, perInstance: number[] }
  /** Each instance's event loop delay in its worst second (from /metrics, sampled with redisDown). */
  instanceLag: Array<{ p99Ms: number, maxMs: number }>
}

export function budgetSection ({ budget }: { budget?: BudgetResult }): string[] {
  if (budget === undefined) return []
  const { zipf, hot, upstream, classes } = budget
  const bound = budget.maxRps + budget.burst
  const second = (n: number): string => `${(n / budget.seconds).toFixed(0)}/s`
  const row = (label: string, result: Outcomes): string => {
    const shares = callerShares(result.outcomes)
    return `| ${label} | ${count(result.requests)} (${second(result.requests)}) | ${count(shares.fresh)} | ${count(shares.stale)} | ${count(shares.unavailable)} | ${count(shares.timeout)}` +
      ` | ${count(shares.other)} | ${statuses(result.outcomes)} | ${ms(result.p50Ms)} / ${ms(result.p99Ms)} / ${ms(result.maxMs)}` +
      ` | ${count(result.overDeadline)}${result.overDeadline === 0 ? '' : ` (${statuses(result.lateOutcomes)})`} |`
  }
  return [
    '',
    `## Upstream budget: ${budget.instances} instances on one Redis, UPSTREAM_MAX_RPS=${budget.maxRps} (burst ${budget.burst}), ${budget.seconds.toFixed(0)} s`,
    '',
    `A Zipf mix (s = ${zipf.exponent}) over ${count(zipf.usernames)} usernames from a cold cache, ${zipf.connections} callers in a closed loop spread` +
      ' over the instances (each asks again as soon as it is answered, or after its Retry-After when told to come back:' +
      ` the fastest rate the instances sustain), and ${hot.usernames} hot usernames, warmed on every instance first, each asked every` +
      ` ${hot.intervalMs} ms on the next instance in turn. PROFILE_TTL_SECONDS=${budget.profileTtlSeconds}, so that each hot entry` +
      ` reaches the end of its freshness (and refresh-ahead has to act) about ${Math.floor(budget.seconds / budget.profileTtlSeconds)} times during the phase;` +
      ` the callers' deadline is UPSTREAM_TIMEOUT_MS=${budget.deadlineMs}; the upstream simulator answers in ${budget.upstreamLatencyMs} ms.` +
      ' Upstream calls are counted from the time each reached the simulator: the busiest window is the most calls in any' +
      ' 1-second window, exactly (every window starting at a call is counted, and a busiest one always can).',
    '',
    '| upstream (and the instances) | value |',
    '|---|---:|',
    `| calls in the busiest 1-second window (bound: ${budget.maxRps} + burst ${budget.burst} = ${bound}) | **${count(upstream.busiest.calls)}**` +
      ` (from ${(upstream.busiest.startMs / 1000).toFixed(2)} s) |`,
    `| the instances' CPU over the load (1.00: a core throughout) | ${budget.instanceCores.map((cores) => cores.toFixed(2)).join(', ')} |`,
    `| the load generator's CPU; its event loop's delay, p99 / max | ${budget.generator.cores.toFixed(2)}; ${ms(budget.generator.lagP99Ms)} / ${ms(budget.generator.lagMaxMs)} |`,
    `| the instances' event loop delay in their worst second, p99 / max | ${budget.instanceLag.map((lag) => `${ms(lag.p99Ms)} / ${ms(lag.maxMs)}`).join(', ')} |`,
    `| samples (one a second) in which an instance saw Redis down, of ${budget.redisDown.samples} | ${budget.redisDown.perInstance.join(', ')} |`,
    `| calls in all, and per second on average | ${count(upstream.calls)}, ${(upstream.calls / budget.seconds).toFixed(1)}/s |`,
    `| calls in each whole second | ${upstream.perSecond.join(' ')} |`,
    `| calls let through, by class | ${statuses(classes.calls)} |`,
    `| calls that waited for budget, by class | ${statuses(classes.deferred)} |`,
    `| calls turned away, by class and reason | ${statuses(classes.dropped)} |`,
    '',
    '| callers | requests | 200 fresh (HIT, MISS) | 200 stale | 503 | 504 | other | by outcome | p50 / p99 / max | past the deadline |',
    '|---|---:|---:|---:|---:|---:|---:|---|---:|---:|',
    row(`Zipf over ${count(zipf.usernames)}`, zipf.result),
    row(`${hot.usernames} hot usernames`, hot.result),
    '',
    `Hot usernames' X-Cache: ${hotMix(hot.result)}.`,
    ...lateNote(zipf.result)
  ]
}

/** `HIT 11,940 (100%)` and the rest: the X-Cache of the hot usernames' answers (a non-200 by its outcome), each but HIT with when it was first seen. */
export function hotMix (result: Outcomes): string {
  return Object.entries(result.outcomes).sort(([, a], [, b]) => b - a).map(([outcome, n]) => {
    const first = result.firstSeenSeconds[outcome]
    const since = outcome === '200 HIT' || first === undefined ? '' : `, first at ${first.toFixed(1)} s`
    return `${outcome.replace(/^200 /, '')} ${count(n)} (${share(n, result.requests)}${since})`
  }).join(', ') || 'none'
}

/** Issue 25's goal: no window over the budget plus its burst; hot usernames 100% HIT; no caller past its deadline. */
export function budgetVerdicts ({ budget }: { budget?: BudgetResult }): Verdict[] {
  if (budget === undefined) return []
  const bound = budget.maxRps + budget.burst
  const hits = budget.hot.result.outcomes['200 HIT'] ?? 0
  const late = budget.zipf.result.overDeadline + budget.hot.result.overDeadline
  const unanswered = (budget.zipf.result.outcomes['0'] ?? 0) + (budget.hot.result.outcomes['0'] ?? 0)
  const slowest = Math.max(budget.zipf.result.maxMs, budget.hot.result.maxMs)
  return [
    {
      target: `Budget: upstream calls in any 1-second window, ${budget.instances} instances, UPSTREAM_MAX_RPS=${budget.maxRps}`,
      goal: `<= ${bound} (the rate plus its burst)`,
      measured: `${count(budget.upstream.busiest.calls)} at most`,
      pass: budget.upstream.busiest.calls <= bound
    },
    {
      target: `Budget: the ${budget.hot.usernames} hot usernames' answers`,
      goal: '100% 200 HIT',
      measured: `${count(hits)} of ${count(budget.hot.result.requests)} (${hotMix(budget.hot.result)})`,
      pass: budget.hot.result.requests > 0 && hits === budget.hot.result.requests
    },
    {
      target: 'Budget: callers answered within their deadline',
      goal: `none past ${count(budget.deadlineMs)} ms, none unanswered`,
      measured: `${count(late)} past it, ${count(unanswered)} unanswered; slowest ${ms(slowest)}`,
      pass: late === 0 && unanswered === 0
    }
  ]
}

/** A share to a tenth of a percent, never rounded up to 100% nor down to 0%. */
export function share (n: number, total: number): string {
  if (total === 0) return 'n/a'
  const tenths = n === total ? 1_000 : n === 0 ? 0 : Math.min(999, Math.max(1, Math.round(n / total * 1_000)))
  return `${(tenths / 10).toFixed(1)}%`
}

/** When the late answers' requests were sent, by second into the load. */
function lateNote (result: Outcomes): string[] {
  const seconds = Object.entries(result.lateBySecond)
  if (seconds.length === 0) return []
  return ['', `Zipf callers answered past their deadline, by the second their request was sent in: ${seconds.map(([second, n]) => `${second} s: ${count(n)}`).join(', ')}.`]
}
