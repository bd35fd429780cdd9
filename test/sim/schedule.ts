import { Prng } from './prng.ts'

// A seed's deployment settings and its random schedule of steps: drawn once, recorded, replayed by seed.

const INSTANCES = 3
/** Few usernames, so that they get hot (refresh-ahead, coalescing across instances). */
const USERNAMES = ['alice', 'bob', 'chloe', 'dmitri'] as const
const FRESHNESS_S = [1, 2, 3, 5, 10, 30, 300]
const FIELDS = ['name', 'age', 'credits', 'about', 'RANK']
/** Instances' clocks up to 10 minutes apart: each within 5 minutes of the deployment's. */
const MAX_SKEW_MS = 300_000
const STEPS = { min: 25, max: 40 }

type Route = 'profile' | 'timeline' | 'field' | 'batch'

export interface Request {
  instance: number
  route: Route
  usernames: string[]
  /** The field route's `query`, or the batch's `fields`. */
  fields?: string[]
}

export type Step =
  | { kind: 'requests', requests: Request[] }
  /** The deployment's clock moves (every instance's with it). */
  | { kind: 'advance', ms: number }
  | { kind: 'purge', instance: number, username: string }
  /** Every published event is lost (the subscribers are cut) until `bus-back`. */
  | { kind: 'bus-loss' }
  | { kind: 'bus-back' }
  /** Redis hangs while these requests run, then resumes. */
  | { kind: 'pause', requests: Request[] }
  | { kind: 'kill' }
  | { kind: 'restart' }
  /** Every key gone: a failover that lost writes. */
  | { kind: 'flush' }

export interface Settings {
  profileTtlS: number
  timelineTtlS: number
  skewsMs: number[]
  /** UPSTREAM_MAX_RPS, or undefined: unlimited. */
  maxRps: number | undefined
}

export interface Schedule {
  seed: number
  settings: Settings
  steps: Step[]
}

export function drawSchedule (seed: number): Schedule {
  const prng = new Prng(seed)
  const settings: Settings = {
    profileTtlS: prng.pick(FRESHNESS_S),
    timelineTtlS: prng.pick(FRESHNESS_S),
    skewsMs: Array.from({ length: INSTANCES }, () => prng.int(-MAX_SKEW_MS, MAX_SKEW_MS)),
    maxRps: prng.chance(0.3) ? prng.pick([2, 5, 20]) : undefined
  }
  const freshMs = Math.min(settings.profileTtlS, settings.timelineTtlS) * 1000
  const steps: Step[] = []
  const state = { redisDown: false, busLost: false }
  const count = prng.int(STEPS.min, STEPS.max)
  while (steps.length < count) steps.push(nextStep(prng, state, freshMs))
  if (state.busLost) steps.push({ kind: 'bus-back' })
  if (state.redisDown) steps.push({ kind: 'restart' })
  return { seed, settings, steps }
}

function nextStep (prng: Prng, state: { redisDown: boolean, busLost: boolean }, freshMs: number): Step {
  const roll = prng.next()
  if (state.redisDown && roll < 0.25) {
    state.redisDown = false
    // A restart empties Redis and its configuration: the bus's loss ends with it.
    state.busLost = false
    return { kind: 'restart' }
  }
  if (roll < 0.5) return { kind: 'requests', requests: requests(prng) }
  if (roll < 0.72) return { kind: 'advance', ms: advance(prng, freshMs) }
  if (roll < 0.8) return { kind: 'purge', instance: prng.int(0, INSTANCES - 1), username: prng.pick(USERNAMES) }
  if (state.redisDown) return { kind: 'requests', requests: requests(prng) }
  if (roll < 0.86) {
    state.busLost = !state.busLost
    return { kind: state.busLost ? 'bus-loss' : 'bus-back' }
  }
  if (roll < 0.89) return { kind: 'pause', requests: requests(prng) }
  if (roll < 0.94) {
    state.redisDown = true
    return { kind: 'kill' }
  }
  return { kind: 'flush' }
}

/** Steps around the freshness's edges (refresh-ahead starts at 0.9), and past a purge's memory. */
function advance (prng: Prng, freshMs: number): number {
  return Math.round(prng.pick([50, 0.3 * freshMs, 0.5 * freshMs, 0.9 * freshMs, freshMs, 1.5 * freshMs, 12_000, 30_000]))
}

function requests (prng: Prng): Request[] {
  return Array.from({ length: prng.int(1, 12) }, () => request(prng))
}

function request (prng: Prng): Request {
  const instance = prng.int(0, INSTANCES - 1)
  const route = prng.pick<Route>(['profile', 'profile', 'timeline', 'field', 'batch'])
  if (route === 'batch') {
    const usernames = [...new Set(Array.from({ length: prng.int(1, 3) }, () => prng.pick(USERNAMES)))]
    return { instance, route, usernames, ...(prng.chance(0.5) && { fields: [prng.pick(FIELDS), prng.pick(FIELDS)] }) }
  }
  const usernames = [prng.pick(USERNAMES)]
  return route === 'field' ? { instance, route, usernames, fields: [prng.pick(FIELDS)] } : { instance, route, usernames }
}
