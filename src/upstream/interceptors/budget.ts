import type { RecentLatency } from '../recent-latency.ts'
import type { UpstreamBudget } from '../budget/upstream-budget.ts'
import { withDeadline } from '../../cancellation.ts'
import { callOf, fail, sendBy, signalOf, type Interceptor } from './edge-call.ts'

export interface BudgetOptions {
  budget: Pick<UpstreamBudget, 'acquire'>
  latency: Pick<RecentLatency, 'expectedMs'>
  now: () => number
}

/**
 * The fleet's upstream budget, before the slots' queue: classes are ordered before a slot is taken, and no slot
 * is held while a call waits for budget. A call waits at most until its remaining time (its one deadline, EdgeCall's)
 * could no longer cover what the upstream has been taking; then a caller is
 * refused (UPSTREAM_BUDGET_EXHAUSTED) and background work dropped (BudgetDropped), never sent.
 */
export function budget ({ budget: gate, latency, now }: BudgetOptions): Interceptor {
  return (dispatch) => (opts, handler) => {
    const call = callOf(opts)
    const lastMoment = sendBy(call, latency.expectedMs)
    const lastChance = withDeadline(signalOf(opts), lastMoment - now())
    gate.acquire(call.priority, lastChance.signal, lastMoment).then(
      () => {
        lastChance.clear()
        dispatch(opts, handler)
      },
      (error: unknown) => {
        lastChance.clear()
        fail(handler, error)
      }
    )
    return true
  }
}
