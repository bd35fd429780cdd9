import type { BudgetResult } from './budget-report.ts'
import type { CoherenceResult } from './coherence.ts'
import type { MissResult } from './miss.ts'
import type { ScenariosResult } from './scenarios.ts'
import type { SoakResult } from './soak.ts'
import type { TargetSummary } from './rounds.ts'
import type { TracingResult } from './tracing.ts'

// What one run of the benchmark measured, phase by phase: what bench/run.ts gathers and render.ts writes.

/** One herd, and its floor: the same burst against as many bare Fastify instances, holding each request for the upstream latency. */
export interface ShelterRound {
  upstreamCalls: number
  p50Ms: number
  p99Ms: number
  statuses: Record<string, number>
  xCache: Record<string, number>
  floorP50Ms: number
  floorP99Ms: number
}

/** How the floor's answer compares with a hit's, byte for byte (see floor-check.ts). */
export interface FloorCheck {
  /** Header names, lower-cased, in the order each sent them. */
  hitHeaders: string[]
  floorHeaders: string[]
  /** Headers both send with other values (`name: hit's / floor's`), the date and the request id aside. */
  differingValues: string[]
  hitBytes: number
  floorBytes: number
  bodyBytes: number
  sameBody: boolean
  /** Each sent a request id of its own to each of two requests. */
  freshRequestIds: boolean
}

/** What the scan phase measured on one instance: many distinct usernames, as fast as it sustains them. */
export interface ScanResult {
  label: string
  /** NODE_OPTIONS the instance ran with ('' for none). */
  nodeOptions: string
  usernames: number
  concurrency: number
  seconds: number
  statuses: Record<string, number>
  /** Before the scan, its peak during it (VmHWM; heap sampled every 100 ms), and after it settled. */
  before: { rssBytes: number, heapUsedBytes: number }
  peak: { rssBytes: number, heapUsedBytes: number }
  settled: { rssBytes: number, heapUsedBytes: number, afterSeconds: number }
  /** The ceiling this configuration is checked against, and why. */
  goal: { maxPeakRssBytes: number, reason: string }
}

export interface BenchResults {
  machine: { date: string, commit: string, cores: number, cpuModel: string, node: string, platform: string, loadAverage: number[] }
  settings: {
    phases: string[]
    upstreamLatencyMs: number
    connections: number
    rounds: number
    roundSeconds: number
    logLevel: string
    warmedUsernames: number
    /** Type errors tsc reported while building what was measured (0 for a clean tree). */
    buildTypeErrors: number
  }
  /** bare: a constant object; floor: bare Fastify sending exactly a hit's headers and bytes. */
  hit?: { bare: TargetSummary, floor: TargetSummary, redis: TargetSummary, memory: TargetSummary, floorCheck: FloorCheck }
  /** Each round: a herd on instances started for it, and its floor (see shelterRounds). */
  shelter?: {
    requests: number
    /** Addresses they came from (X-Forwarded-For; 1: the connections' own). */
    clients: number
    instances: number
    rounds: ShelterRound[]
  }
  zipf?: {
    requests: number
    usernames: number
    exponent: number
    distinctRequested: number
    upstreamCalls: number
    usernamesCalledTwice: number
    tokenExchanges: number
    statuses: Record<string, number>
    seconds: number
    /** RSS of the instance right after the mix. */
    serviceRssBytes: number | undefined
  }
  /** A list page of warm members: single requests against one batch request. */
  batch?: {
    usernames: number
    pageViews: number
    singles: { requests: number, p50Ms: number, p99Ms: number, bodyBytes: number }
    batch: { requests: number, p50Ms: number, p99Ms: number, bodyBytes: number, brotliBytes: number }
  }
  /** One instance on a Redis of its own: hung (SIGSTOP) for `seconds` under load, then killed for `seconds`. */
  redisTrouble?: {
    seconds: number
    usernames: number
    /** Requests in flight at some moment of the hang; `afterMaxMs`: the slowest that started after SIGCONT. */
    hang: { requests: number, errors: number, p50Ms: number, p99Ms: number, maxMs: number, afterMaxMs: number }
    /** Requests during the outage; upstream calls per (warmed) username meanwhile, and in the 2 s after the restart. */
    outage: { requests: number, errors: number, maxCallsPerUsername: number, callsAfterReturn: number }
  }
  scan?: ScanResult[]
  /** Issue 25: three instances under a fleet-wide upstream budget (see budget.ts). */
  budget?: BudgetResult
  /** Issue 35: a purge's propagation to the other instances (see coherence.ts). */
  coherence?: CoherenceResult
  /** Issue 33: cold misses beside direct calls to the same upstream, both stores. */
  miss?: MissResult
  /** Tracing's cost (issue 26): hits and misses with tracing off, and on at 100% and 1%. */
  tracing?: TracingResult
  /** Issue 32: one instance on its in-process store for minutes, wrk over many usernames (see soak.ts). */
  soak?: SoakResult
  /** Issue 32: a slow upstream and a hung identity provider (see scenarios.ts). */
  scenarios?: ScenariosResult
}
