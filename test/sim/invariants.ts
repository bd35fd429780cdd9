import type { Answer } from './answers.ts'
import type { Fleet } from './fleet.ts'
import type { Settings } from './schedule.ts'

// The fleet's invariants, checked after every step against what the upstream saw and what callers were answered.

export interface Violation {
  step: number
  invariant: 'call-bound' | 'budget-window' | 'hit-past-freshness' | 'purge-undone' | 'error-answer'
  detail: string
}

/** What a HIT may be older than its freshness: the answer's own trip and the clocks' offsets to Redis (half a round trip). */
const SLACK_MS = 500
/** Without the bus, a copy in an instance answers HIT at most this long (docs/redis-layer.md). */
export const COPY_MS = 2_000
/** How long a change of the budget's hands shows in its seconds: the calls leased before it lapse within two lease periods (a second each at most). */
const BUDGET_SWITCH_REACH_MS = 2_000
/** Answers a caller may get from a healthy fleet: a success, or the fleet's budget spent. */
const EXPECTED_CODES = new Set(['UPSTREAM_BUDGET_EXHAUSTED'])

function freshnessMs (settings: Settings, kind: 'profile' | 'timeline' | 'user'): number {
  return (kind === 'timeline' ? settings.timelineTtlS : settings.profileTtlS) * 1000
}

/** Per username and route, over the time T run so far: ceil(T / 0.9 F) + 1, one per purge and failover, and each instance's own while Redis was away. */
export function callBound (fleet: Fleet, settings: Settings, step: number): Violation[] {
  const elapsed = fleet.now() - fleet.startedAt
  const violations: Violation[] = []
  for (const [key, calls] of fleet.sim.stats.calls) {
    const [kind = '', username = ''] = key.split(':', 2)
    const windowMs = 0.9 * freshnessMs(settings, kind as 'profile')
    const purges = fleet.purges.filter((purge) => purge.username === username).length
    const alone = fleet.outages.reduce((sum, { from, to }) => sum + fleet.apps.length * (Math.ceil(((to ?? fleet.now()) - from) / windowMs) + 1), 0)
    const bound = Math.ceil(elapsed / windowMs) + 1 + purges + fleet.failovers + alone
    if (calls > bound) {
      violations.push({ step, invariant: 'call-bound', detail: `${key}: ${calls} upstream calls in ${elapsed} ms at ${windowMs / 900} s freshness, bound ${bound} (${purges} purges, ${fleet.failovers} failovers, ${fleet.outages.length} outages)` })
    }
  }
  return violations
}

/**
 * With UPSTREAM_MAX_RPS, the calls of each second of the deployment's clock (the one the calls' times are on): at most
 * rps + burst, a burst more per change of hands of the budget within BUDGET_SWITCH_REACH_MS of that second (a
 * restart or flush empties the fleet's bucket; an outage's edges hand it to the instances' own buckets and back).
 */
export function budgetWindows (fleet: Fleet, settings: Settings, step: number): Violation[] {
  const rps = settings.maxRps
  if (rps === undefined) return []
  // UPSTREAM_BURST is unset: a second of the rate.
  const burst = rps
  const perSecond = new Map<number, number>()
  for (const call of fleet.calls) {
    const second = Math.floor(call.at / 1000)
    perSecond.set(second, (perSecond.get(second) ?? 0) + 1)
  }
  return [...perSecond].flatMap(([second, count]) => {
    const switches = fleet.budgetSwitches.filter((at) => Math.abs(second * 1000 + 500 - at) < 500 + BUDGET_SWITCH_REACH_MS).length
    const bound = rps + burst * (1 + switches)
    return count > bound ? [{ step, invariant: 'budget-window' as const, detail: `${count} calls in second ${second - Math.floor(fleet.startedAt / 1000)} of the run, bound ${bound} (${switches} budget switches)` }] : []
  })
}

/** A HIT's Age within its freshness, and each part of its body loaded within its freshness before (deployment clock). */
export function hitFreshness (fleet: Fleet, settings: Settings, answer: Answer, step: number): Violation[] {
  if (answer.cache !== 'HIT') return []
  const violations: Violation[] = []
  for (const index of answer.calls) {
    const call = fleet.calls[index]
    if (call === undefined) continue
    const limitS = freshnessMs(settings, call.kind) / 1000
    if ((answer.ageS ?? 0) > limitS) violations.push({ step, invariant: 'hit-past-freshness', detail: `${answer.url} on instance ${answer.instance}: HIT with Age ${answer.ageS} s, freshness ${limitS} s` })
    // A pause re-measured the instances' offsets to Redis's clock, which the moved clock does not move: older calls' times no longer compare.
    if (call.pauses !== fleet.pauses) continue
    const ageMs = answer.sentAt - call.at
    if (ageMs > limitS * 1000 + SLACK_MS) {
      violations.push({ step, invariant: 'hit-past-freshness', detail: `${answer.url} on instance ${answer.instance}: HIT of call #${index} (${call.kind}:${call.username}) loaded ${ageMs} ms before, freshness ${limitS} s` })
    }
  }
  return violations
}

/** After a purge answered 200, no HIT of a body loaded before it (but a copy's 2 s when the purge's event was lost). */
export function purgeKept (fleet: Fleet, answer: Answer, step: number): Violation[] {
  if (answer.cache !== 'HIT') return []
  const violations: Violation[] = []
  for (const index of answer.calls) {
    const call = fleet.calls[index]
    if (call === undefined) continue
    const undone = fleet.purges.find((purge) => purge.username === call.username && purge.status === 200 && purge.at <= answer.sentAt &&
      call.version < purge.version && !(purge.busLost && answer.sentAt - purge.at <= COPY_MS + SLACK_MS))
    if (undone !== undefined) {
      violations.push({ step, invariant: 'purge-undone', detail: `${answer.url} on instance ${answer.instance}: HIT of call #${index} (version ${call.version}) ${answer.sentAt - undone.at} ms after a purge of ${call.username} answered 200${undone.busLost ? ' while the bus was lost' : ''}` })
    }
  }
  return violations
}

export function expectedAnswer (answer: Answer, step: number): Violation[] {
  if (answer.status === 200 || EXPECTED_CODES.has(answer.code ?? '')) return []
  return [{ step, invariant: 'error-answer', detail: `${answer.url} on instance ${answer.instance}: ${answer.status} ${answer.code}` }]
}
