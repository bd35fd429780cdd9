import { Counter, Gauge, type Registry } from 'prom-client'
import type { StoreHeld, StoreTelemetry } from './telemetry.ts'

const PREFIX = 'pbff_memory_store_'

/** The in-process store (CACHE_MEMORY_MB), as prom-client metrics in `registry`: gauges read when rendered, no sample before there is a store. */
export function storeMetrics (registry: Registry): StoreTelemetry {
  const registers = [registry]
  let held: (() => StoreHeld) | undefined
  const gauge = (name: string, help: string, read: (now: StoreHeld) => number): Gauge => {
    const metric: Gauge = new Gauge({
      name: `${PREFIX}${name}`,
      help,
      registers,
      collect: () => { if (held !== undefined) metric.set(read(held())) }
    })
    return metric
  }
  gauge('bytes', 'Heap the in-process store\'s entries take, as it counts them (key, body, tag, encodings, fixed overhead)', (now) => now.bytes)
  gauge('max_bytes', 'The in-process store\'s bound (CACHE_MEMORY_MB)', (now) => now.maxBytes)
  gauge('entries', 'Entries the in-process store holds (without Redis, or while it is away)', (now) => now.entries)
  const freshEvictions = new Counter({
    name: `${PREFIX}fresh_evictions_total`,
    help: 'Entries still fresh pushed out by the in-process store\'s bound: each will be loaded again before its time (raise CACHE_MEMORY_MB)',
    registers
  })
  return {
    memoryStore: (read) => { held = read },
    freshEviction: () => { freshEvictions.inc() }
  }
}
