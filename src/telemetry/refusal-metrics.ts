import { Counter, type Registry } from 'prom-client'
import { REFUSAL_REASONS, type RefusalReason } from '../errors.ts'

/** Callers refused at once, by reason, as a prom-client counter in `registry`: every reason's series exists from the start. */
export function refusalMetrics (registry: Registry): (reason: RefusalReason) => void {
  const refusals = new Counter({
    name: 'pbff_refusals_total',
    help: 'Callers answered at once with a refusal, by reason (no-token, backoff, budget, overloaded, breaker, rate-limited); the log sums them up once a second',
    labelNames: ['reason'],
    registers: [registry]
  })
  for (const reason of REFUSAL_REASONS) refusals.labels(reason).inc(0)
  return (reason) => { refusals.labels(reason).inc() }
}
