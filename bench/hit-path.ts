import { runRound, type RoundResult } from './load.ts'
import type { RunningChild } from './processes.ts'
import { invalidReasons, isValid, summarize, type TargetSummary } from './rounds.ts'

interface HitTarget { label: string, server: RunningChild, paths: string[], metrics: boolean }

/**
 * The hit path's rounds: a warm-up per target, then the four targets interleaved, round after round. Past `rounds`,
 * more rounds (up to `maxRounds`) while fewer than `rounds` were valid for every target: on a busy machine the
 * neighbours take the server's core in some rounds, and the ratios are taken over the valid ones only.
 */
export async function hitPathRounds (
  { bare, redis, memory, paths, rounds, maxRounds, load, log }: {
    bare: RunningChild
    redis: RunningChild
    memory: RunningChild
    paths: string[]
    rounds: number
    maxRounds: number
    load: { connections: number, seconds: number, warmUpSeconds: number }
    log: (line: string) => void
  }
): Promise<{ bare: TargetSummary, floor: TargetSummary, redis: TargetSummary, memory: TargetSummary }> {
  const targets = {
    bare: { label: 'bare Fastify', server: bare, paths, metrics: false },
    floor: { label: 'floor (bare, a hit\'s bytes)', server: bare, paths: paths.map((path) => `/floor${path}`), metrics: false },
    redis: { label: 'service, Redis', server: redis, paths, metrics: true },
    memory: { label: 'service, in-process', server: memory, paths, metrics: true }
  }
  const order: HitTarget[] = [targets.bare, targets.floor, targets.redis, targets.memory]
  const results = new Map(order.map((target): [string, RoundResult[]] => [target.label, []]))
  const drive = async (target: HitTarget, seconds: number): Promise<RoundResult> =>
    await runRound({ url: target.server.url, cpu: target.server.cpu, metrics: target.metrics }, target.paths, { connections: load.connections, seconds })
  log(`hit path: wrk -t1 -c${load.connections}, a ${load.warmUpSeconds} s warm-up per target, then ${rounds} rounds of ${load.seconds} s over ${order.length} targets` +
    `${maxRounds > rounds ? ` (up to ${maxRounds} while fewer than ${rounds} are valid for all)` : ''}`)
  for (const target of order) await drive(target, load.warmUpSeconds)
  let validForAll = 0
  for (let round = 1; round <= Math.max(rounds, maxRounds); round++) {
    if (round > rounds && validForAll >= rounds) break
    let allValid = true
    for (const target of order) {
      const result = await drive(target, load.seconds)
      results.get(target.label)?.push(result)
      const reasons = invalidReasons(result)
      allValid &&= isValid(result)
      log(`round ${round} ${target.label}: ${Math.round(result.requestsPerSecond)} req/s, p99 ${result.p99Ms.toFixed(2)} ms,` +
        ` ${result.serverCpuUs.toFixed(1)} µs CPU per response, server busy ${percent(result.serverBusy)}, wrk ${percent(result.generatorCpu)} of a core` +
        `${reasons.length === 0 ? '' : ` — INVALID: ${reasons.join('; ')}`}`)
    }
    if (allValid) validForAll++
  }
  const summary = (target: HitTarget): TargetSummary => summarize(target.label, results.get(target.label) ?? [])
  return { bare: summary(targets.bare), floor: summary(targets.floor), redis: summary(targets.redis), memory: summary(targets.memory) }
}

function percent (share: number): string {
  return Number.isNaN(share) ? 'n/a' : `${Math.round(share * 100)}%`
}
