import type { Config } from '../../config.ts'
import { SharedBudgetBucket, type SharedBudgetLaw } from '../../redis/budget-bucket.ts'
import type { RedisLayer } from '../../redis/layer.ts'
import { CallBudget } from './call-budget.ts'
import type { Schedule } from './schedule.ts'
import { FleetSource, type BudgetRate } from './fleet-source.ts'
import { budgetSettings, FLOOR_SHARE, HALVING_COOLDOWN_MS, RECOVERY_PER_SECOND, stateTtlMs, type BudgetSettings } from './law.ts'
import type { Priority } from '../../resources.ts'
import { noTelemetry, type BudgetTelemetry } from '../../telemetry/telemetry.ts'

/** The gate an upstream call passes before it is sent (see CallBudget), and what the edge tells it of a 429. */
export interface UpstreamBudget {
  /** `sendBy` (the app's clock): when the call must be sent at the latest. */
  acquire: (priority: Priority, signal: AbortSignal, sendBy?: number) => Promise<void>
  /** A caller's refusal known now, before it would queue (see CallBudget); undefined: it may try. */
  refusesNow: (priority: Priority, sendBy: number) => Error | undefined
  /** Whether `refusesNow` would refuse, counting nothing. */
  refuses: (priority: Priority, sendBy: number) => boolean
  slowDown: (holdMs: number) => Promise<void>
  /** Undefined when the rate is unlimited. */
  rate: () => BudgetRate | undefined
}

export interface UpstreamBudgetOptions {
  config: Pick<Config, 'UPSTREAM_MAX_RPS' | 'UPSTREAM_BURST' | 'UPSTREAM_EXPECTED_INSTANCES' | 'UPSTREAM_TIMEOUT_MS' | 'CACHE_KEY_PREFIX'>
  /** Absent without Redis: each instance keeps to its share. */
  redis?: Pick<RedisLayer, 'client' | 'health' | 'clock' | 'membership'>
  now: () => number
  schedule?: Schedule
  telemetry?: BudgetTelemetry
  /** A Redis failure (the budget then goes on locally), for a debug log. */
  onError: (error: unknown) => void
}

/** The deployment's budget of `config`: a gate on the fleet's bucket, or, with UPSTREAM_MAX_RPS=0, one that only counts. */
export function createUpstreamBudget (options: UpstreamBudgetOptions): UpstreamBudget {
  const { config, redis, now, telemetry = noTelemetry, onError } = options
  const settings = budgetSettings(config)
  if (settings === undefined) return unlimited(telemetry)
  const source = new FleetSource({
    settings,
    ...(redis !== undefined && {
      shared: new SharedBudgetBucket({
        redis: redis.client,
        health: redis.health,
        clock: redis.clock,
        key: `${config.CACHE_KEY_PREFIX}upstream:budget`,
        law: sharedLaw(settings)
      }),
      health: redis.health,
      ...(redis.membership !== undefined && { members: redis.membership })
    }),
    now,
    onInstances: (count) => { telemetry.budgetInstances(count) },
    onError
  })
  const backgroundWaitMs = config.UPSTREAM_TIMEOUT_MS / 4
  return new CallBudget({ source, now, telemetry, onError, backgroundWaitMs, ...(options.schedule !== undefined && { schedule: options.schedule }) })
}

export function sharedLaw (settings: BudgetSettings): SharedBudgetLaw {
  const { rps, burst, leaseMs } = settings
  return {
    rps,
    burst,
    leaseMs,
    recoveryRps: rps * RECOVERY_PER_SECOND,
    floorRps: rps * FLOOR_SHARE,
    cooldownMs: HALVING_COOLDOWN_MS,
    ttlMs: stateTtlMs(settings)
  }
}

function unlimited (telemetry: BudgetTelemetry): UpstreamBudget {
  return {
    acquire: async (priority, signal) => {
      signal.throwIfAborted()
      telemetry.budgetCall(priority)
    },
    refusesNow: () => undefined,
    refuses: () => false,
    slowDown: async () => {},
    rate: () => undefined
  }
}
