// A storm of refused misses, as issue 33's refusal figure was first taken (wrk, 100 connections, a new username each
// request): `npx tsx bench/refusal-storm.ts [rounds]`, about 2 minutes; needs wrk and redis-server. The built service,
// run as `npm start` runs it, with an identity provider that refuses connections, so that every miss is refused at
// once (no token), on each store; beside it, bare Fastify sending the same answer, straight away and after one HGETALL
// of an absent key (bare-server.ts): that read's own cost under the same load. Rounds interleaved, medians reported.
// bench/refusal.ts measures the same refusal one request at a time, through app.inject.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { buildService } from './build.ts'
import { assertWrkInstalled, runRound, type RoundResult } from './load.ts'
import { commandCount } from './miss.ts'
import { OwnRedis } from './own-redis.ts'
import { answerToCopy } from './phases.ts'
import { ProcessGroup, type RunningChild } from './processes.ts'
import { isValid } from './rounds.ts'
import { median } from './stats.ts'
import { startBare, startService, startSimulator } from './targets.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const ROUNDS = Number(process.argv[2] ?? 5)
const LOAD = { connections: 100, seconds: 4 }
const WARM_SECONDS = 2
/** Nothing listens there: every token exchange fails at once, and the service refuses its misses meanwhile. */
const CLOSED_IDENTITY_PROVIDER = 'http://127.0.0.1:1'
/** A refused miss stores nothing, so a username asked again is as cold as a new one. */
const USERNAMES = 20_000

interface Target {
  name: string
  child: RunningChild
  route: string
  /** The service's own: its statuses read from /metrics, and (Redis) the commands it sent. */
  service?: { commands: boolean }
}
interface Round extends RoundResult {
  commandsPerResponse?: number
}

async function main (): Promise<void> {
  assertWrkInstalled()
  buildService(ROOT, console.log)
  const group = new ProcessGroup({ root: ROOT, logDir: mkdtempSync(join(tmpdir(), 'pbff-bench-storm-')) })
  const redis = await OwnRedis.start()
  const stats = new Redis(redis.url)
  try {
    const simulator = await startSimulator(group, 20, 'simulator-storm')
    const refusing = { AUTH_URL: CLOSED_IDENTITY_PROVIDER }
    const memory = await startService(group, { name: 'refusing-memory', simulator, logLevel: 'info', env: refusing })
    const shared = await startService(group, { name: 'refusing-redis', simulator, logLevel: 'info', env: refusing, redis: { url: redis.url, keyPrefix: 'pbff-bench-storm:' } })
    const refusal = await answerToCopy(shared, '/profile/storm-first')
    console.log(`the refusal: ${refusal.status} ${refusal.body}`)
    const bare = await startBare(group, { name: 'bare-refusal', body: refusal.body, headers: refusal.headers, delayMs: 0, redisUrl: redis.url })
    const targets: Target[] = [
      { name: 'refused, in-process', child: memory, route: '/profile', service: { commands: false } },
      { name: 'refused, Redis', child: shared, route: '/profile', service: { commands: true } },
      { name: 'bare Fastify, the same answer', child: bare, route: '/floor/profile' },
      { name: 'bare Fastify, one read first', child: bare, route: '/read/profile' }
    ]
    const pathsOf = (target: Target): string[] => Array.from({ length: USERNAMES }, (_, index) => `${target.route}/storm-${index}`)
    for (const target of targets) await runRound({ url: target.child.url }, pathsOf(target), { ...LOAD, seconds: WARM_SECONDS })
    const rounds = new Map<Target, Round[]>(targets.map((target) => [target, []]))
    for (let round = 0; round < ROUNDS; round++) {
      // Each round in another order: a machine growing busier weighs on all.
      for (const target of [...targets.slice(round % targets.length), ...targets.slice(0, round % targets.length)]) {
        const before = target.service?.commands === true ? await commandCount(stats) : 0
        const result = await runRound({ url: target.child.url, cpu: target.child.cpu, metrics: target.service !== undefined }, pathsOf(target), LOAD)
        // Less the second INFO's own call.
        const commands = target.service?.commands === true ? { commandsPerResponse: (await commandCount(stats) - before - 1) / result.responses } : {}
        rounds.get(target)?.push({ ...result, ...commands })
      }
    }
    report(targets, rounds)
  } finally {
    await group.stopAll()
    stats.disconnect()
    redis.stop()
  }
}

function report (targets: Target[], rounds: Map<Target, Round[]>): void {
  const of = (target: Target | undefined): Round[] => (target === undefined ? undefined : rounds.get(target)) ?? []
  const us = (value: number): string => `${value.toFixed(1)} µs`
  console.log(`\n${ROUNDS} rounds of ${LOAD.seconds} s each, wrk -t1 -c${LOAD.connections}, ${USERNAMES} usernames in turn; ` +
    'medians over the valid rounds (the hit path\'s rule, rounds.ts), over all of them (*) when none was')
  console.log('| target | valid rounds | CPU per response, median (range) | req/s | server main thread busy | wrk CPU | wrk socket errors | Redis commands per response | statuses |')
  console.log('|---|---:|---|---:|---:|---:|---:|---:|---|')
  for (const target of targets) {
    const results = of(target)
    const valid = results.filter(isValid)
    const counted = valid.length > 0 ? valid : results
    const cpu = counted.map((result) => result.serverCpuUs)
    const statuses: Record<string, number> = {}
    for (const result of results) for (const [status, count] of Object.entries(result.served?.statuses ?? {})) statuses[status] = (statuses[status] ?? 0) + count
    const commands = counted.flatMap((result) => result.commandsPerResponse ?? [])
    console.log(`| ${target.name} | ${valid.length} of ${results.length} | ${us(median(cpu))}${valid.length > 0 ? '' : '*'} (${us(Math.min(...cpu))} to ${us(Math.max(...cpu))}) | ` +
      `${median(counted.map((result) => result.requestsPerSecond)).toFixed(0)} | ` +
      `${median(counted.map((result) => result.serverBusy)).toFixed(2)} | ${median(counted.map((result) => result.generatorCpu)).toFixed(2)} | ` +
      `${results.reduce((sum, result) => sum + result.errors, 0)} | ` +
      `${commands.length > 0 ? median(commands).toFixed(3) : ''} | ${target.service === undefined ? '' : JSON.stringify(statuses)} |`)
  }
  // Each round's differences: the two bare routes share a process, and each trio ran in the same round; counted where all three were valid.
  const [, redisRefusal = [], floor = [], read = []] = targets.map(of)
  const trios = redisRefusal.map((refusal, index) => ({ refusal, floor: floor[index], read: read[index] }))
    .flatMap(({ refusal, floor, read }) => floor === undefined || read === undefined ? [] : [{ refusal, floor, read }])
  const valid = trios.filter(({ refusal, floor, read }) => isValid(refusal) && isValid(floor) && isValid(read))
  const counted = valid.length > 0 ? valid : trios
  const readUs = counted.map(({ floor, read }) => read.serverCpuUs - floor.serverCpuUs)
  const beyond = counted.map(({ refusal }, index) => refusal.serverCpuUs - (readUs[index] ?? Number.NaN))
  console.log(`\nrounds valid for the refusal and both bare routes: ${valid.length} of ${trios.length}${valid.length > 0 ? '' : ' (all counted)'}`)
  console.log(`the one read (bare Fastify's second route over its first, round by round): median ${us(median(readUs))}`)
  console.log(`the Redis refusal beyond that read, round by round: median ${us(median(beyond))} (${beyond.map((value) => value.toFixed(1)).join(', ')})`)
}

await main()
