import { Gauge, Histogram, type Registry } from 'prom-client'
import type { BusTelemetry } from './telemetry.ts'

/** A purge should reach every instance within 10 ms: buckets around that, up to the copies' 2 s bound. */
const PROPAGATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2]

/** The instances' event bus (Redis pub/sub), as prom-client metrics in `registry`. */
export function busMetrics (registry: Registry): BusTelemetry {
  const registers = [registry]
  let state: boolean | undefined
  const up = new Gauge({
    name: 'pbff_redis_bus_up',
    help: '1 while the other instances\' events reach this one (subscribed, Redis up), 0 while not: copies then last their 2 s bound; ' +
      'no sample without REDIS_URL',
    registers,
    collect: () => {
      if (state === undefined) up.remove()
      else up.set(state ? 1 : 0)
    }
  })
  const propagation = new Histogram({
    name: 'pbff_purge_propagation_seconds',
    help: 'From a purge on another instance (its script sent) to its event applied here, both on Redis\'s clock: good to both ' +
      'instances\' offset errors together (about 2 ms)',
    buckets: PROPAGATION_BUCKETS,
    registers
  })
  return {
    up: (ready) => { state = ready },
    purgePropagation: (seconds) => { propagation.observe(seconds) }
  }
}
