import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Pool } from 'undici'
import { percentile } from './stats.ts'

// The budget phase's load generator and arithmetic (issue 25 point 6): what callers got, counted as they get it,
// and the upstream's calls per window, from the time each call reached the simulator.

/** What one stream of callers got: answers by outcome (`200 HIT`, `200 STALE`, `503 UPSTREAM_BUDGET_EXHAUSTED`, `0` for no answer). */
export interface Outcomes {
  requests: number
  outcomes: Record<string, number>
  /** Answers (or failures) that came later than the callers' deadline, and those by outcome. */
  overDeadline: number
  lateOutcomes: Record<string, number>
  /** Late answers by the whole second into the load in which their request was sent ('3': from 3 s to 4 s). */
  lateBySecond: Record<string, number>
  /** When each outcome was first seen, in s from the tally's start (its request's start). */
  firstSeenSeconds: Record<string, number>
  p50Ms: number
  p99Ms: number
  maxMs: number
}

/** Counts answers as they come; `summary()` once the stream is over. */
export class Tally {
  readonly #outcomes: Record<string, number> = {}
  readonly #latencies: number[] = []
  readonly #late: Record<string, number> = {}
  /** Late answers by the whole second (into the load) their request was sent in. */
  readonly #lateBySecond: Record<string, number> = {}
  readonly #firstSeen: Record<string, number> = {}
  readonly #deadlineMs: number
  readonly #startedAt: number
  #overDeadline = 0

  /** `startedAt`: the moment (performance.now()) first-seen times count from. */
  constructor (deadlineMs: number, startedAt = performance.now()) {
    this.#deadlineMs = deadlineMs
    this.#startedAt = startedAt
  }

  /** One answer: `startedAt` is when its request was sent (performance.now()). */
  add (outcome: string, ms: number, startedAt = this.#startedAt): void {
    this.#outcomes[outcome] = (this.#outcomes[outcome] ?? 0) + 1
    this.#firstSeen[outcome] ??= (startedAt - this.#startedAt) / 1_000
    this.#latencies.push(ms)
    if (ms > this.#deadlineMs) {
      this.#overDeadline++
      this.#late[outcome] = (this.#late[outcome] ?? 0) + 1
      const second = String(Math.floor((startedAt - this.#startedAt) / 1_000))
      this.#lateBySecond[second] = (this.#lateBySecond[second] ?? 0) + 1
    }
  }

  summary (): Outcomes {
    let maxMs = 0
    for (const latency of this.#latencies) if (latency > maxMs) maxMs = latency
    return {
      requests: this.#latencies.length,
      outcomes: { ...this.#outcomes },
      overDeadline: this.#overDeadline,
      lateOutcomes: { ...this.#late },
      lateBySecond: { ...this.#lateBySecond },
      firstSeenSeconds: { ...this.#firstSeen },
      p50Ms: percentile(this.#latencies, 50),
      p99Ms: percentile(this.#latencies, 99),
      maxMs
    }
  }
}

/** `200 HIT` for a 200 (its X-Cache), `503 UPSTREAM_BUDGET_EXHAUSTED` for an error (its code), `0` for no answer. */
export function outcomeOf (status: number, xCache: string | undefined, body: string): string {
  if (status === 0) return '0'
  if (status === 200) return `200 ${xCache ?? 'none'}`
  try {
    const code = (JSON.parse(body) as { code?: unknown }).code
    return typeof code === 'string' ? `${status} ${code}` : String(status)
  } catch {
    return String(status)
  }
}

/** What callers got, in the terms: a 200 fresh (HIT, MISS, BYPASS), a 200 stale, a 503, a 504, anything else. */
export function callerShares (outcomes: Record<string, number>): { fresh: number, stale: number, unavailable: number, timeout: number, other: number } {
  const shares = { fresh: 0, stale: 0, unavailable: 0, timeout: 0, other: 0 }
  for (const [outcome, n] of Object.entries(outcomes)) {
    if (outcome === '200 STALE') shares.stale += n
    else if (outcome.startsWith('200 ')) shares.fresh += n
    else if (outcome === '503' || outcome.startsWith('503 ')) shares.unavailable += n
    else if (outcome === '504' || outcome.startsWith('504 ')) shares.timeout += n
    else shares.other += n
  }
  return shares
}

/** One request, timed and tallied; the body is read only when it is an error's. Never rejects. */
/** Asks for `path` and tallies the answer; resolves to its `Retry-After` in seconds (0 when it has none). */
export async function tallied (pool: Pool, path: string, tally: Tally): Promise<number> {
  const started = performance.now()
  let outcome = '0'
  let retryAfter = 0
  try {
    const response = await pool.request({ method: 'GET', path })
    const xCache = response.headers['x-cache']
    const body = response.statusCode === 200 ? (await response.body.dump(), '') : await response.body.text()
    outcome = outcomeOf(response.statusCode, typeof xCache === 'string' ? xCache : undefined, body)
    retryAfter = Number(response.headers['retry-after'] ?? 0) || 0
  } catch {}
  tally.add(outcome, performance.now() - started, started)
  return retryAfter
}

/**
 * A closed loop: `connections` callers, spread over `pools` in turn, each asking for `nextPath()` as soon as its
 * last answer came, until `running()` says stop: as fast as the instances answer. A caller told to come back later
 * (`Retry-After`) does, as the contract asks of callers, rather than asking again at once.
 */
export async function closedLoop ({ pools, connections, nextPath, running, tally, pause = sleep }: {
  pools: Pool[], connections: number, nextPath: () => string, running: () => boolean, tally: Tally, pause?: (ms: number) => Promise<unknown>
}): Promise<void> {
  const caller = async (index: number): Promise<void> => {
    const pool = pools[index % pools.length] as Pool
    while (running()) {
      const retryAfter = await tallied(pool, nextPath(), tally)
      if (retryAfter > 0) await pause(retryAfter * 1_000)
    }
  }
  await Promise.all(Array.from({ length: connections }, async (_, index) => { await caller(index) }))
}

/**
 * A paced stream: every `intervalMs`, each of `paths` once, each on the next pool in turn (so every instance sees
 * every hot username), whether or not earlier answers came; resolves once the last one is answered.
 */
export async function pacedLoop (
  { pools, paths, intervalMs, running, tally }: { pools: Pool[], paths: string[], intervalMs: number, running: () => boolean, tally: Tally }
): Promise<void> {
  const inFlight = new Set<Promise<void>>()
  const started = performance.now()
  for (let tick = 0; running(); tick++) {
    paths.forEach((path, index) => {
      const sent = tallied(pools[(index + tick) % pools.length] as Pool, path, tally).then(() => {}).finally(() => inFlight.delete(sent))
      inFlight.add(sent)
    })
    await sleep(Math.max(0, started + (tick + 1) * intervalMs - performance.now()))
  }
  await Promise.all(inFlight)
}

export interface BusiestWindow {
  calls: number
  /** Its start, from the first call, in ms. */
  startMs: number
}

/**
 * The most calls in any window of `windowMs`, [t, t + windowMs), from each call's arrival time at the upstream
 * (sorted, ms): a busiest window can always be slid to start at a call, so trying each call's time is exact.
 */
export function busiestWindow (times: readonly number[], windowMs = 1_000): BusiestWindow {
  let busiest: BusiestWindow = { calls: 0, startMs: 0 }
  let end = 0
  for (let start = 0; start < times.length; start++) {
    const from = times[start] as number
    while (end < times.length && (times[end] as number) < from + windowMs) end++
    if (end - start > busiest.calls) busiest = { calls: end - start, startMs: from - (times[0] as number) }
  }
  return busiest
}

/** Calls in each whole second from the first call, for the record. */
export function perSecond (times: readonly number[]): number[] {
  const first = times[0]
  if (first === undefined) return []
  const counts: number[] = []
  for (const at of times) {
    const second = Math.floor((at - first) / 1_000)
    while (counts.length <= second) counts.push(0)
    counts[second] = (counts[second] as number) + 1
  }
  return counts
}
