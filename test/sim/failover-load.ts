// What the failover tests (Sentinel, Cluster) share: a deployment under load, and what a user sees of it (issue 35 point 3).
import type { FastifyInstance } from 'fastify'
import { anotherApp, eventually, simulator, testConfig, untilRedisReady, type TestContext } from '../helper.ts'
import type { Simulator, SimulatorOptions } from '../../dev/simulator.ts'

export const WARM = Array.from({ length: 20 }, (_, i) => `warm-${i}`)

export interface Deployment {
  sim: Simulator
  apps: FastifyInstance[]
  /** Each upstream data call: when it arrived (ms, the host's clock), and for whom. */
  calls: Array<{ at: number, username: string }>
}

/** `count` apps of one deployment on the Redis `redisEnv` names, every one connected and subscribed. */
export async function deployment (t: TestContext, count: number, redisEnv: Record<string, string>, simOptions: SimulatorOptions = {}): Promise<Deployment> {
  const calls: Deployment['calls'] = []
  const sim = await simulator(t, { ...simOptions, mark: ({ username }) => { calls.push({ at: Date.now(), username }); return '' } })
  // The callers here are one test client: its own rate limit is not what these tests are about.
  const config = testConfig(t, sim, { RATE_LIMIT_PER_MINUTE: '0', ...redisEnv })
  const apps: FastifyInstance[] = []
  for (let i = 0; i < count; i++) apps.push(await anotherApp(t, config))
  for (const app of apps) await untilRedisReady(app, count)
  return { sim, apps, calls }
}

/** Asks each app for every warm username until `done`; the answers that were not 200. */
export async function askWarm (apps: FastifyInstance[], done: () => boolean, extra: (app: FastifyInstance) => Array<Promise<unknown>> = () => []): Promise<{ failures: string[], served: number }> {
  const failures: string[] = []
  let served = 0
  await eventually(async () => {
    await Promise.all(apps.flatMap((app, i) => [
      ...WARM.map(async (username) => {
        const answer = await app.inject(`/profile/${username}`)
        served++
        if (answer.statusCode !== 200) failures.push(`app ${i} ${username}: ${answer.statusCode}`)
      }),
      ...extra(app)
    ]))
    return done()
  }, 'the failover', 30_000)
  return { failures, served }
}

export interface FailoverUnderLoad {
  failures: string[]
  served: number
  killedAt: number
  /** When `promoted` resolved (a replica is the primary now), and when every app was on it again. */
  promotedAt: number
  sharedAgainAt: number
  tokenExchanges: number
}

/**
 * Warm usernames held by every app, then asked on each, with ten cold ones per app and round (more misses than the
 * budget covers), while `kill` kills a primary; the load goes on until 2 s after `sharedAgain` resolves.
 */
export async function failoverUnderLoad (
  { sim, apps }: Deployment,
  { kill, promoted, sharedAgain }: { kill: () => Promise<void>, promoted: () => Promise<void>, sharedAgain: () => Promise<void> }
): Promise<FailoverUnderLoad> {
  for (const username of WARM) {
    for (const app of apps) await app.inject(`/profile/${username}`)
  }
  const exchanges = sim.stats.tokenRequests
  let cold = 0
  const coldLoad = (app: FastifyInstance): Array<Promise<unknown>> => Array.from({ length: 10 }, async () => await app.inject(`/profile/cold-${cold++}`))
  let sharedAgainAt = Infinity
  const load = askWarm(apps, () => Date.now() > sharedAgainAt + 2_000, coldLoad)
  await eventually(() => cold > 100, 'load under way')
  const killedAt = Date.now()
  await kill()
  await promoted()
  const promotedAt = Date.now()
  await sharedAgain()
  sharedAgainAt = Date.now()
  const { failures, served } = await load
  return { failures, served, killedAt, promotedAt, sharedAgainAt, tokenExchanges: sim.stats.tokenRequests - exchanges }
}

/** The assertions of a tap test this uses (any tap version's typings). */
interface Asserts {
  same: (found: unknown, wanted: unknown, message: string) => boolean
  ok: (value: unknown, message: string) => boolean
  comment: (message: string) => void
}

/**
 * The upstream bound through `failovers` failovers: each warm username called once (plus one per failover), the busiest
 * exact second within rps + burst (plus a burst per failover), the budget used, at most one token exchange more per
 * failover, and no warm username failed.
 */
export function assertBound (t: Asserts, { sim, calls: dataCalls }: Deployment, run: FailoverUnderLoad, { rps, burst, failovers = 1 }: { rps: number, burst: number, failovers?: number }): void {
  t.same(run.failures, [], `${run.served} answers for warm usernames under load, through the failover (killed to promoted ${run.promotedAt - run.killedAt} ms, ` +
    `to shared again ${run.sharedAgainAt - run.killedAt} ms), none failed`)
  const calls = WARM.map((username) => sim.callsFor('profile', username))
  const perUsername = `upstream calls per warm username: ${calls.join(' ')} (at most 1 + ${failovers})`
  t.ok(Math.max(...calls) <= 1 + failovers, perUsername)
  const bySecond = new Map<number, number>()
  for (const { at } of dataCalls) bySecond.set(Math.floor(at / 1000), (bySecond.get(Math.floor(at / 1000)) ?? 0) + 1)
  const busiest = Math.max(...bySecond.values())
  const bound = rps + burst * (1 + failovers)
  t.ok(busiest <= bound, `the busiest second: ${busiest} upstream calls <= rps + burst + a burst per failover (${bound})`)
  t.ok(dataCalls.length > 3 * rps, `the budget was used: ${dataCalls.length} calls`)
  t.ok(run.tokenExchanges <= failovers, `${run.tokenExchanges} more token exchanges`)
  t.comment(`upstream calls by second: ${[...bySecond.values()].join(' ')}`)
}
