import { ConfigSchema } from '../src/config.ts'
import { fileURLToPath } from 'node:url'
import { npmStartOptionsAt, SERVER_ENTRY } from './build.ts'
import { HOST, type ProcessGroup, type RunningChild } from './processes.ts'

/** The simulator's default credentials; the service is given the same ones. */
const CLIENT_ID = 'dev-client'
const CLIENT_SECRET = 'dev-secret'

/**
 * High enough never to answer 429 to the one load-generating address, low enough to keep the limiter
 * (once there is one) on the measured path, as it is in production.
 */
const RATE_LIMIT_PER_MINUTE = 1_000_000_000

/** The hit path must stay fresh for the whole run, whatever the default freshness becomes. */
const PROFILE_TTL_SECONDS = 3_600

export interface Simulator extends RunningChild {
  latencyMs: number
}

export async function startSimulator (group: ProcessGroup, latencyMs: number, name = 'simulator'): Promise<Simulator> {
  const child = await group.start({
    name,
    args: ['--import', 'tsx', 'dev/simulator-server.ts'],
    readyPath: '/__sim/stats',
    env: { ...baseEnv(), SIM_PORT: '0', SIM_HOST: HOST, SIM_LATENCY_MS: String(latencyMs), CLIENT_ID, CLIENT_SECRET }
  })
  return { ...child, latencyMs }
}

export interface ServiceOptions {
  name: string
  simulator: Simulator
  logLevel: string
  /** Set: the Redis store, under this key prefix. Unset: the in-process store. */
  redis?: { url: string, keyPrefix: string }
  /** Flags for node before the entry, e.g. `--cpu-prof`. */
  nodeArgs?: string[]
  /** NODE_OPTIONS, as an image or a manifest sets it; unset: none (the parent's is never passed on). */
  nodeOptions?: string
  /** Run as the image runs it (its CMD: `node dist/server.js`), not with `npm start`'s node options. */
  asImage?: boolean
  /** Another build of the server to run (a variant of dist/, see devices.ts); default SERVER_ENTRY. */
  entry?: string
  /** The service's variables to set beyond (or instead of) the bench's own, e.g. `UPSTREAM_MAX_RPS`. */
  env?: Record<string, string>
}

/** The built service, as `npm start` runs it (its node options included, see build.ts), configured only by its environment. */
export async function startService (group: ProcessGroup, options: ServiceOptions): Promise<RunningChild> {
  const env: Record<string, string> = {
    ...baseEnv(),
    HOST,
    UPSTREAM_BASE_URL: options.simulator.url,
    AUTH_URL: options.simulator.url,
    CLIENT_ID,
    CLIENT_SECRET,
    LOG_LEVEL: options.logLevel,
    RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT_PER_MINUTE),
    PROFILE_TTL_SECONDS: String(PROFILE_TTL_SECONDS),
    // No load balancer to drain: an instance the run is done with stops at once, not after 5 s of readiness 503s.
    SHUTDOWN_DELAY_MS: '0',
    ...options.env
  }
  if (options.nodeOptions !== undefined && options.nodeOptions !== '') env.NODE_OPTIONS = options.nodeOptions
  if (options.redis !== undefined) {
    env.REDIS_URL = options.redis.url
    env.CACHE_KEY_PREFIX = options.redis.keyPrefix
  }
  const startOptions = options.asImage === true ? [] : npmStartOptionsAt(fileURLToPath(new URL('..', import.meta.url)))
  return await group.start({ name: options.name, args: [...startOptions, ...(options.nodeArgs ?? []), options.entry ?? SERVER_ENTRY], readyPath: '/healthz', env: { ...env, PORT: '0' } })
}

/**
 * The yardsticks, in one bare Fastify process: a constant object on `/profile/...`, the floor (`headers`
 * and `body` exactly as a hit sends them) on `/floor/profile/...`, and `body` after `delayMs` on `/slow/...`; with
 * `redisUrl`, the floor after one read of an absent key on `/read/profile/...`.
 * It runs through tsx: the loader costs memory and start-up, not time per request.
 */
export async function startBare (
  group: ProcessGroup,
  { name = 'bare-fastify', body, headers = {}, delayMs, nodeArgs = [], redisUrl }:
  { name?: string, body: string, headers?: Record<string, string>, delayMs: number, nodeArgs?: string[], redisUrl?: string }
): Promise<RunningChild> {
  return await group.start({
    name,
    args: [...nodeArgs, '--import', 'tsx', 'bench/bare-server.ts'],
    readyPath: '/healthz',
    env: {
      ...baseEnv(),
      PORT: '0',
      BARE_BODY: body,
      BARE_HEADERS: JSON.stringify(headers),
      BARE_DELAY_MS: String(delayMs),
      ...(redisUrl !== undefined && { BARE_REDIS_URL: redisUrl })
    }
  })
}

/** The cold miss's floor (bare-proxy.ts): bare Fastify forwarding each profile to `upstream` with `authorization`; with `redisUrl`, between a read and a write. */
export async function startBareProxy (
  group: ProcessGroup,
  { name = 'bare-proxy', upstream, authorization, redisUrl, nodeArgs = [] }: { name?: string, upstream: string, authorization: string, redisUrl?: string, nodeArgs?: string[] }
): Promise<RunningChild> {
  return await group.start({
    name,
    args: [...nodeArgs, '--import', 'tsx', 'bench/bare-proxy.ts'],
    readyPath: '/healthz',
    env: { ...baseEnv(), PORT: '0', BARE_UPSTREAM: upstream, BARE_AUTHORIZATION: authorization, ...(redisUrl !== undefined && { BARE_REDIS_URL: redisUrl }) }
  })
}

/** The parent's environment without any of the service's variables nor NODE_OPTIONS: each child gets exactly what it is given. */
function baseEnv (): Record<string, string> {
  const env: Record<string, string> = {}
  const serviceKeys = new Set(Object.keys(ConfigSchema.properties))
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !serviceKeys.has(key) && !key.startsWith('SIM_') && key !== 'NODE_OPTIONS') env[key] = value
  }
  return env
}
