import type { Priority } from '../../resources.ts'
import type { DropReason } from '../../telemetry/telemetry.ts'

export interface ClassRules {
  /** Whether a caller hears of a refusal (then as UPSTREAM_BUDGET_EXHAUSTED at its deadline). */
  callerFacing: boolean
  /** Waiting calls of this class beyond which one more is dropped at once. */
  maxQueued: number
  /** How long a call of this class waits at most before it is dropped. */
  maxWaitMs: number
  /** The share of the fleet's bucket a lease for this class must leave for the classes above. */
  reserveShare: number
}

/**
 * Callers wait as long as their deadline allows. Background work waits a little (never more than a quarter of a caller's
 * time: see CallBudgetOptions), and only while the fleet's bucket is more than a quarter full; refresh-ahead is for
 * spare budget only: half the bucket left, a short wait, few queued.
 */
export const RULES: Readonly<Record<Priority, ClassRules>> = {
  caller: { callerFacing: true, maxQueued: Infinity, maxWaitMs: Infinity, reserveShare: 0 },
  background: { callerFacing: false, maxQueued: 32, maxWaitMs: 2_000, reserveShare: 0.25 },
  'refresh-ahead': { callerFacing: false, maxQueued: 8, maxWaitMs: 500, reserveShare: 0.5 }
}

/** Background work turned away for want of budget: never a caller's error (the entry stays as it is). */
export class BudgetDropped extends Error {
  override name = 'BudgetDropped'
  readonly priority: Priority
  readonly reason: DropReason

  constructor (priority: Priority, reason: DropReason) {
    super(`${priority} call dropped: ${reason.replace('_', ' ')}`)
    this.priority = priority
    this.reason = reason
  }
}

export function isBudgetDropped (error: unknown): error is BudgetDropped {
  return error instanceof BudgetDropped
}
