import { Counter, Gauge, type Registry } from 'prom-client'
import { PRIORITIES } from '../resources.ts'
import type { BudgetScope, BudgetTelemetry } from './telemetry.ts'

const PREFIX = 'pbff_upstream_budget_'

/** The fleet's upstream budget (UPSTREAM_MAX_RPS), as prom-client metrics in `registry`. */
export function budgetMetrics (registry: Registry): BudgetTelemetry {
  const registers = [registry]
  const calls = new Counter({
    name: `${PREFIX}calls_total`,
    help: 'Upstream calls let through by the fleet\'s budget, by priority (caller, background, refresh-ahead)',
    labelNames: ['priority'],
    registers
  })
  const deferred = new Counter({
    name: `${PREFIX}deferred_total`,
    help: 'Upstream calls that found the fleet\'s budget spent and waited for it, by priority',
    labelNames: ['priority'],
    registers
  })
  const dropped = new Counter({
    name: `${PREFIX}dropped_total`,
    help: 'Upstream calls turned away for want of budget: background work dropped (queue_full, waited_too_long), or a caller at its deadline (deadline)',
    labelNames: ['priority', 'reason'],
    registers
  })
  const rps = new Gauge({
    name: `${PREFIX}rps`,
    help: 'The effective budget in calls per second: the fleet\'s (scope fleet), or this instance\'s share while Redis is away (scope instance); no sample when unlimited',
    labelNames: ['scope'],
    registers
  })
  const instances = new Gauge({
    name: `${PREFIX}fleet_instances`,
    help: 'The instances the budget is shared by: the live count while Redis is up, else the larger of the largest count Redis answered in the last 3 s and UPSTREAM_EXPECTED_INSTANCES; no sample when unlimited',
    registers
  })
  // A gauge without labels starts at 0: no sample until the first count, rather than 0 instances while unlimited.
  instances.remove()
  // Series an operator alerts on exist from the start, at zero.
  for (const priority of PRIORITIES) dropped.labels(priority, priority === 'caller' ? 'deadline' : 'queue_full').inc(0)
  return {
    budgetCall: (priority) => { calls.labels(priority).inc() },
    budgetDeferred: (priority) => { deferred.labels(priority).inc() },
    budgetDropped: (priority, reason) => { dropped.labels(priority, reason).inc() },
    budgetRate: (value: number, scope: BudgetScope) => {
      rps.reset()
      rps.labels(scope).set(value)
    },
    budgetInstances: (count) => { instances.set(count) }
  }
}
