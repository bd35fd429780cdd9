import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppOptions } from '../src/app.ts'
import { loadConfig, type Config } from '../src/config.ts'
import { serviceEnv } from '../dev/service-env.ts'
import { startSimulator, type Simulator, type SimulatorOptions } from '../dev/simulator.ts'
import { Clock, type TestContext } from './helpers/clock.ts'
import type { Gate } from './helpers/gate.ts'
import { deleteKeys, REDIS_URL, untilRedisReady } from './helpers/redis.ts'

// The one module tests import helpers from.
export { Clock, eventually, HostClock, settle, type TestContext } from './helpers/clock.ts'
export { unitConfig } from './helpers/config.ts'
export { gate } from './helpers/gate.ts'
export { capturedLogger, FakeEndpoint, recordingLog, recordingTelemetry, type LogLine } from './helpers/fakes.ts'
export { profiles, tally, usernames } from './helpers/load.ts'
export { metric, parseMetrics, type Sample } from './helpers/prometheus.ts'
export { busInstance, deadRedis, fakeHealth, oneRedisClock, rawRedis, REDIS_URL, testLayer, testPrefix, testRedis, tokenKeyOf, untilRedisReady } from './helpers/redis.ts'
export { roundTripsOf } from './helpers/round-trips.ts'
export { available, freeClusterPort, freePort, RedisServer, redisCluster, sentinelGroup } from './helpers/redis-server.ts'
export { quietBus, sharedTier } from './helpers/shared-tier.ts'
export { excusable, STALL_MS, stallMeter } from './helpers/stalls.ts'
export { Timers } from './helpers/timers.ts'

export interface Stack {
  app: FastifyInstance
  sim: Simulator
  config: Config
}

export interface StackOptions {
  env?: Record<string, string>
  sim?: SimulatorOptions
  logger?: AppOptions['logger']
  now?: AppOptions['now']
  /** Default: no shedding on event-loop delay, which on a busy test machine measures the machine, not the app. */
  loadShedding?: AppOptions['loadShedding']
}

/** What every test app but load shedding's own is given (see StackOptions.loadShedding). */
export const NO_DELAY_SHEDDING: AppOptions['loadShedding'] = { maxEventLoopDelay: 0 }

/** A simulator on port 0, closed with the test. */
export async function simulator (t: TestContext, options: SimulatorOptions = {}): Promise<Simulator> {
  const sim = await startSimulator(options)
  t.teardown(() => sim.close())
  return sim
}

/**
 * The configuration a test app gets: pointed at `sim`, silent, with a key prefix of its own, whose keys on the
 * shared Redis are deleted after the test's apps have closed (teardowns run last registered first).
 */
export function testConfig (t: TestContext, sim: Simulator, env: Record<string, string> = {}): Config {
  const config = loadConfig({
    ...serviceEnv(sim),
    LOG_LEVEL: 'silent',
    CACHE_KEY_PREFIX: `pbff-test:${randomUUID()}:`,
    ...env
  })
  if (config.REDIS_URL === REDIS_URL) t.teardown(async () => await deleteKeys(config.CACHE_KEY_PREFIX))
  return config
}

/** An app in front of a fresh simulator; both closed with the test. */
export async function stack (t: TestContext, options: StackOptions = {}): Promise<Stack> {
  const sim = await simulator(t, options.sim)
  const config = testConfig(t, sim, options.env)
  const app = await buildApp({
    config,
    loadShedding: options.loadShedding ?? NO_DELAY_SHEDDING,
    ...(options.logger !== undefined && { logger: options.logger }),
    ...(options.now !== undefined && { now: options.now })
  })
  t.teardown(() => app.close())
  return { app, sim, config }
}

/** A second app on the same simulator (and, with REDIS_URL, the same Redis and key prefix). */
export async function anotherApp (t: TestContext, config: Config, now?: AppOptions['now']): Promise<FastifyInstance> {
  const app = await buildApp({ config, loadShedding: NO_DELAY_SHEDDING, ...(now !== undefined && { now }) })
  t.teardown(() => app.close())
  return app
}

export interface CacheStack extends Stack {
  clock: Clock
  /** Another instance of the same deployment: same simulator, Redis, key prefix and clock. */
  another: () => Promise<FastifyInstance>
}

export interface CacheStackOptions {
  env?: Record<string, string>
  sim?: SimulatorOptions
  /** Default true: return once Redis and its pub/sub are connected. */
  waitForRedis?: boolean
  /** The data calls go through this gate on their way to the simulator, so that the test can hold a load. */
  gate?: Gate
}

/** An app on the shared Redis (unless `env` says otherwise) with a clock of its own, before a fresh simulator. */
export async function cacheStack (t: TestContext, { env = {}, sim: simOptions, waitForRedis = true, gate }: CacheStackOptions = {}): Promise<CacheStack> {
  const sim = await simulator(t, { ...simOptions, ...(gate !== undefined && { audience: gate.url }) })
  if (gate !== undefined) gate.target = sim.baseUrl
  const config = testConfig(t, sim, { REDIS_URL, ...(gate !== undefined && { UPSTREAM_BASE_URL: gate.url }), ...env })
  const clock = new Clock()
  let instances = 0
  const build = async (): Promise<FastifyInstance> => {
    const app = await anotherApp(t, config, clock.now)
    if (waitForRedis) await untilRedisReady(app, ++instances)
    return app
  }
  return { app: await build(), sim, config, clock, another: build }
}
