import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppOptions } from '../src/app.js'
import { loadConfig, type Config } from '../src/config.js'
import { startSimulator, type Simulator, type SimulatorOptions } from '../dev/simulator.js'

/** The slice of a tap test the helpers need (so they work with any tap version's typings). */
export interface TestContext {
  teardown: (fn: () => unknown) => void
}

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
}

/** A simulator on port 0, closed with the test. */
export async function simulator (t: TestContext, options: SimulatorOptions = {}): Promise<Simulator> {
  const sim = await startSimulator(options)
  t.teardown(() => sim.close())
  return sim
}

/** The configuration a test app gets: pointed at `sim`, silent, with a key prefix of its own. */
export function testConfig (sim: Simulator, env: Record<string, string> = {}): Config {
  return loadConfig({
    UPSTREAM_BASE_URL: sim.baseUrl,
    AUTH_URL: sim.authUrl,
    CLIENT_ID: sim.options.clientId,
    CLIENT_SECRET: sim.options.clientSecret,
    LOG_LEVEL: 'silent',
    CACHE_KEY_PREFIX: `pbff-test:${randomUUID()}:`,
    ...env
  })
}

/** An app in front of a fresh simulator; both closed with the test. */
export async function stack (t: TestContext, options: StackOptions = {}): Promise<Stack> {
  const sim = await simulator(t, options.sim)
  const config = testConfig(sim, options.env)
  const app = await buildApp({
    config,
    ...(options.logger !== undefined && { logger: options.logger }),
    ...(options.now !== undefined && { now: options.now })
  })
  t.teardown(() => app.close())
  return { app, sim, config }
}

/** A second app on the same simulator (and, with REDIS_URL, the same Redis and key prefix). */
export async function anotherApp (t: TestContext, config: Config): Promise<FastifyInstance> {
  const app = await buildApp({ config })
  t.teardown(() => app.close())
  return app
}
