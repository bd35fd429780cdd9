import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { runRound, type RoundResult } from './load.ts'
import { warm } from './phases.ts'
import { HOST, type ProcessGroup, type RunningChild } from './processes.ts'
import { connectionsTo, stream } from './requests.ts'
import { invalidReasons, summarize, type TargetSummary } from './rounds.ts'
import { percentile } from './stats.ts'
import { count, ms, pct, statuses, us } from './format.ts'
import { startService, type Simulator } from './targets.ts'

// Issue 26: what tracing costs a hit and a miss, at 100% and 1% sampling, beside the same service with tracing off.

/** The three instances measured: tracing off (no OTEL_* variable), and on with each sampling ratio. */
const TARGETS: ReadonlyArray<{ label: string, ratio?: string }> = [
  { label: 'tracing off' },
  { label: 'tracing on, 100% sampled', ratio: '1' },
  { label: 'tracing on, 1% sampled', ratio: '0.01' }
]

export interface TracingMisses {
  label: string
  misses: number
  /** The instance's CPU time (every thread) per miss, in µs: the request, the load, the upstream call, the spans and their export. */
  cpuUs: number
  p50Ms: number
  p99Ms: number
  statuses: Record<string, number>
}

export interface TracingResult {
  /** Each target's hit rounds, interleaved as in the hit phase. */
  hits: TargetSummary[]
  misses: TracingMisses[]
  /** Export requests the collector stand-in received, and their bytes. */
  exports: { requests: number, bytes: number }
  missConcurrency: number
}

export interface TracingPhaseOptions {
  group: ProcessGroup
  simulator: Simulator
  logLevel: string
  paths: string[]
  rounds: number
  load: { connections: number, seconds: number, warmUpSeconds: number }
  misses: { count: number, concurrency: number }
  log: (line: string) => void
}

/**
 * Three instances on the in-process store, the traced ones exporting to a collector stand-in in this process (it
 * answers 200 and counts; it runs on the bench's core, not the instances'). Hits: wrk rounds over warmed usernames,
 * interleaved. Misses: `misses.count` cold usernames per instance and round, `misses.concurrency` at a time.
 */
export async function tracingPhase (options: TracingPhaseOptions): Promise<TracingResult> {
  const { group, simulator, logLevel, paths, rounds, load, misses, log } = options
  const collector = await collectorStandIn()
  try {
    const instances = await Promise.all(TARGETS.map(async ({ label, ratio }, index) => ({
      label,
      server: await startService(group, {
        name: `service-tracing-${index}`,
        simulator,
        logLevel,
        env: ratio === undefined
          ? {}
          : { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio }
      })
    })))
    for (const { server } of instances) await warm(server, paths)
    log(`tracing: hits, wrk -t1 -c${load.connections}, ${rounds} rounds of ${load.seconds} s over ${instances.length} instances`)
    const hitRounds = new Map(instances.map(({ label }): [string, RoundResult[]] => [label, []]))
    const missRounds = new Map(instances.map(({ label }): [string, TracingMisses[]] => [label, []]))
    for (const { server } of instances) await runRound({ url: server.url, cpu: server.cpu, metrics: true }, paths, { connections: load.connections, seconds: load.warmUpSeconds })
    for (let round = 1; round <= rounds; round++) {
      for (const { label, server } of instances) {
        const result = await runRound({ url: server.url, cpu: server.cpu, metrics: true }, paths, { connections: load.connections, seconds: load.seconds })
        hitRounds.get(label)?.push(result)
        const reasons = invalidReasons(result)
        log(`round ${round} ${label}: hits ${Math.round(result.requestsPerSecond)} req/s, ${result.serverCpuUs.toFixed(1)} µs CPU each` +
          `${reasons.length === 0 ? '' : ` — INVALID: ${reasons.join('; ')}`}`)
        const cold = Array.from({ length: misses.count }, (_, i) => `/profile/trace-miss-${round}-${i}`)
        const measured = await missRound(label, server, cold, misses.concurrency)
        missRounds.get(label)?.push(measured)
        log(`round ${round} ${label}: ${count(measured.misses)} misses, ${measured.cpuUs.toFixed(0)} µs CPU each, p50 ${ms(measured.p50Ms)}, p99 ${ms(measured.p99Ms)}`)
      }
    }
    return {
      hits: instances.map(({ label }) => summarize(label, hitRounds.get(label) ?? [])),
      misses: instances.map(({ label }) => medianMisses(label, missRounds.get(label) ?? [])),
      exports: { requests: collector.requests, bytes: collector.bytes },
      missConcurrency: misses.concurrency
    }
  } finally {
    await collector.close()
  }
}

async function missRound (label: string, server: RunningChild, paths: string[], concurrency: number): Promise<TracingMisses> {
  const pool = connectionsTo(server.url, concurrency)
  try {
    const before = server.cpu()
    const answers = await stream(pool, paths, concurrency)
    const after = server.cpu()
    const times = answers.map((answer) => answer.ms)
    const statuses: Record<string, number> = {}
    for (const { status } of answers) statuses[status] = (statuses[status] ?? 0) + 1
    return {
      label,
      misses: answers.length,
      cpuUs: before === undefined || after === undefined ? Number.NaN : (after.processMs - before.processMs) * 1000 / answers.length,
      p50Ms: percentile(times, 50),
      p99Ms: percentile(times, 99),
      statuses
    }
  } finally {
    await pool.close()
  }
}

/** The round of median CPU per miss (a busy neighbour shows in some rounds, not in the median). */
function medianMisses (label: string, rounds: TracingMisses[]): TracingMisses {
  const sorted = [...rounds].sort((a, b) => a.cpuUs - b.cpuUs)
  return sorted[sorted.length >> 1] ?? { label, misses: 0, cpuUs: Number.NaN, p50Ms: Number.NaN, p99Ms: Number.NaN, statuses: {} }
}

/** An OTLP/HTTP endpoint that accepts every export and keeps only the count. */
async function collectorStandIn (): Promise<{ url: string, requests: number, bytes: number, close: () => Promise<void> }> {
  const received = { requests: 0, bytes: 0 }
  const server = createServer((request, response) => {
    received.requests++
    request.on('data', (chunk: Buffer) => { received.bytes += chunk.length })
    request.on('end', () => { response.writeHead(200, { 'content-type': 'application/json' }).end('{}') })
  })
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://${HOST}:${port}`,
    get requests () { return received.requests },
    get bytes () { return received.bytes },
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** The report's section: each instance's hits and misses, against tracing off. */
export function tracingSection ({ tracing }: { tracing?: TracingResult }): string[] {
  if (tracing === undefined) return []
  const [off] = tracing.hits
  const offMisses = tracing.misses[0]
  return [
    '',
    '## Tracing (issue 26)',
    '',
    `Three instances on the in-process store: tracing off, and on (\`parentbased_traceidratio\`) at 100% and 1%, exporting to a collector stand-in. Hits: wrk rounds over warmed usernames, interleaved; misses: cold usernames, ${tracing.missConcurrency} at a time, the round of median CPU.` +
      ` The stand-in received ${count(tracing.exports.requests)} exports (${count(tracing.exports.bytes)} bytes).`,
    '',
    '| instance | hits req/s | CPU per hit | vs off | valid rounds | CPU per miss | vs off | miss p50 / p99 | statuses |',
    '|---|---|---|---|---|---|---|---|---|',
    ...tracing.hits.map((hit, index) => {
      const miss = tracing.misses[index]
      return `| ${hit.label} | ${count(Math.round(hit.requestsPerSecond))} | ${us(hit.serverCpuUs)} | ${versus(hit.serverCpuUs, off?.serverCpuUs)} |` +
        ` ${hit.validRounds}/${hit.rounds.length} | ${us(miss?.cpuUs ?? Number.NaN)} | ${versus(miss?.cpuUs ?? Number.NaN, offMisses?.cpuUs)} |` +
        ` ${ms(miss?.p50Ms ?? Number.NaN)} / ${ms(miss?.p99Ms ?? Number.NaN)} | ${statuses(miss?.statuses ?? {})} |`
    })
  ]
}

/** `value` against `base`, signed: `+12%`. */
function versus (value: number, base: number | undefined): string {
  if (base === undefined) return 'n/a'
  const share = value / base - 1
  return `${share >= 0 ? '+' : ''}${pct(share)}`
}
