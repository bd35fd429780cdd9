import type { Redis } from 'ioredis'
import { SharedBudgetBucket } from '../../../src/redis/budget-bucket.ts'
import { RedisClock } from '../../../src/redis/clock.ts'
import type { RedisHealth } from '../../../src/redis/health.ts'
import type { Membership } from '../../../src/redis/membership.ts'
import { CallBudget } from '../../../src/upstream/budget/call-budget.ts'
import { FleetSource } from '../../../src/upstream/budget/fleet-source.ts'
import { budgetSettings, type BudgetSettings } from '../../../src/upstream/budget/law.ts'
import type { Priority } from '../../../src/resources.ts'
import type { BudgetTelemetry } from '../../../src/telemetry/telemetry.ts'
import { sharedLaw } from '../../../src/upstream/budget/upstream-budget.ts'
import { Timers, type Clock } from '../../helper.ts'

export { Timers }

/** `redis`, counting the scripts it runs. */
export function countingEvals (redis: Redis): { redis: Redis, evals: () => number } {
  let evals = 0
  const counted = Object.assign(Object.create(redis) as Redis, {
    eval: async (...args: Parameters<Redis['eval']>) => { evals++; return await redis.eval(...args) }
  })
  return { redis: counted, evals: () => evals }
}

export function settingsOf (rps: number, instances: number, burst?: number): BudgetSettings {
  const settings = budgetSettings({ UPSTREAM_MAX_RPS: rps, UPSTREAM_BURST: burst, UPSTREAM_EXPECTED_INSTANCES: instances })
  if (settings === undefined) throw new Error('a budget needs a rate')
  return settings
}

export interface InstanceOptions {
  clock: Clock
  timers: Timers
  settings: BudgetSettings
  /** The fleet's bucket: a client on the shared Redis and the key every instance uses. */
  shared?: { redis: Redis, key: string, health: Pick<RedisHealth, 'up' | 'run'> & Partial<Pick<RedisHealth, 'listen'>>, clock?: RedisClock }
  telemetry?: BudgetTelemetry
  errors?: unknown[]
  /** The fleet's live count as this instance sees it (see Membership). */
  members?: Pick<Membership, 'lastSeen' | 'recentMost'>
}

/** One instance's gate (its leases tracked by `timers`). */
export function instance ({ clock, timers, settings, shared, telemetry, errors = [], members }: InstanceOptions): CallBudget {
  const onError = (error: unknown): void => { errors.push(error) }
  const source = new FleetSource({
    settings,
    ...(shared !== undefined && {
      shared: new SharedBudgetBucket({
        redis: shared.redis,
        health: shared.health,
        clock: shared.clock ?? new RedisClock(clock.now),
        key: shared.key,
        law: sharedLaw(settings)
      }),
      health: shared.health
    }),
    ...(members !== undefined && { members }),
    now: clock.now,
    onError
  })
  const tracked = {
    lease: (...args: Parameters<FleetSource['lease']>) => timers.track(source.lease(...args)),
    slowDown: (...args: Parameters<FleetSource['slowDown']>) => timers.track(source.slowDown(...args)),
    rate: (now: number) => source.rate(now)
  }
  return new CallBudget({ source: tracked, now: clock.now, schedule: timers.schedule, random: seeded(), onError, ...(telemetry !== undefined && { telemetry }) })
}

let seed = 1

/** A reproducible sequence in [0, 1), different for each instance (a linear congruential generator). */
function seeded (): () => number {
  let state = seed++
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31
    return state / 2 ** 31
  }
}

/** What became of the calls a test sent through a gate. */
export class Outcomes {
  readonly granted: Array<{ priority: Priority, at: number, tag: string }> = []
  readonly refused: Array<{ priority: Priority, error: unknown, tag: string }> = []
  readonly #clock: Clock

  constructor (clock: Clock) {
    this.#clock = clock
  }

  /** `count` calls of `priority` through `gate`; the signal defaults to one that never aborts. */
  ask (gate: Pick<CallBudget, 'acquire'>, priority: Priority, count = 1, signal = new AbortController().signal, tag: string = priority): void {
    for (let i = 0; i < count; i++) {
      gate.acquire(priority, signal).then(
        () => { this.granted.push({ priority, at: this.#clock.now(), tag }) },
        (error: unknown) => { this.refused.push({ priority, error, tag }) }
      )
    }
  }

  grantedOf (tag: string): number {
    return this.granted.filter((grant) => grant.tag === tag).length
  }

  /** The most calls granted in any `windowMs` (windows starting at a grant). */
  peak (windowMs: number, tag?: string): number {
    const times = this.granted.filter((grant) => tag === undefined || grant.tag === tag).map((grant) => grant.at).sort((a, b) => a - b)
    let most = 0
    let end = 0
    for (let start = 0; start < times.length; start++) {
      while (end < times.length && (times[end] ?? 0) < (times[start] ?? 0) + windowMs) end++
      most = Math.max(most, end - start)
    }
    return most
  }
}

export function recordingBudgetTelemetry (): BudgetTelemetry & { events: string[] } {
  const events: string[] = []
  return {
    events,
    budgetCall: (priority) => { events.push(`call:${priority}`) },
    budgetDeferred: (priority) => { events.push(`deferred:${priority}`) },
    budgetDropped: (priority, reason) => { events.push(`dropped:${priority}:${reason}`) },
    budgetRate: (rps, scope) => { events.push(`rate:${rps}:${scope}`) },
    budgetInstances: (count) => { events.push(`instances:${count}`) }
  }
}
