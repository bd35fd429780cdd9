import { Counter, Gauge, type Registry } from 'prom-client'
import { readGauges } from './read-gauges.ts'
import type { BreakerState } from './telemetry.ts'

const PREFIX = 'pbff_upstream_'
const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half_open']

/** The upstream calls this instance holds: sent (their slot kept until the upstream answers, callers gone or not), and waiting for a slot. */
interface CallsHeld {
  inFlight: number
  queued: number
}

/** What the upstream edge reports: its back-off window, its circuit breaker, and the calls its concurrency limit holds. */
export interface EdgeMetrics {
  backoff: (active: boolean) => void
  breaker: (state: BreakerState) => void
  /** The limiter to read when the metrics are rendered. */
  upstreamLimiter: (held: () => CallsHeld) => void
  /** The breaker to read when the metrics are rendered: it goes from open to half open with time, not with a call. */
  upstreamBreaker: (state: () => BreakerState) => void
}

/** The upstream edge, as prom-client metrics in `registry`: the limiter's gauges read when rendered, no sample before there is one. */
export function edgeMetrics (registry: Registry): EdgeMetrics {
  const registers = [registry]
  // The states last reported, to count transitions (a repeated report is not a new window).
  let inBackoff = false
  let breakerState: BreakerState | undefined
  const backoffActive = new Gauge({
    name: `${PREFIX}backoff_active`,
    help: '1 while the upstream asked us to back off (429 Retry-After window), else 0',
    registers
  })
  const backoffWindows = new Counter({ name: `${PREFIX}backoff_windows_total`, help: 'Back-off windows entered', registers })
  let readBreaker: (() => BreakerState) | undefined
  const breakerGauge = new Gauge({
    name: `${PREFIX}breaker_state`,
    help: 'The upstream circuit breaker: 1 for its current state (closed, open, half_open), 0 for the others',
    labelNames: ['state'],
    registers,
    // Read, an open breaker whose time is up moves to half open, and reports it (breaker, below).
    collect: () => { readBreaker?.() }
  })
  const breakerOpenings = new Counter({ name: `${PREFIX}breaker_openings_total`, help: 'Times the upstream circuit breaker opened', registers })
  const held = readGauges<CallsHeld>(registry, PREFIX)
  held.gauge('calls_in_flight', 'Upstream calls sent and not yet answered (at most UPSTREAM_MAX_CONCURRENCY): a sent call keeps its slot after its callers left', (now) => now.inFlight)
  held.gauge('calls_queued', 'Upstream calls waiting for a slot (at most 8 per slot of UPSTREAM_MAX_CONCURRENCY; past it, callers are refused: overloaded)', (now) => now.queued)
  const breaker = (state: BreakerState): void => {
    if (state === 'open' && breakerState !== 'open') breakerOpenings.inc()
    breakerState = state
    for (const each of BREAKER_STATES) breakerGauge.labels(each).set(each === state ? 1 : 0)
  }
  // Series an operator alerts on exist from the start.
  breaker('closed')
  return {
    backoff: (active) => {
      if (active && !inBackoff) backoffWindows.inc()
      inBackoff = active
      backoffActive.set(active ? 1 : 0)
    },
    breaker,
    upstreamLimiter: held.readFrom,
    upstreamBreaker: (read) => { readBreaker = read }
  }
}
