import { Counter, type Registry } from 'prom-client'
import { readGauges } from './read-gauges.ts'
import type { StoreHeld, StoreTelemetry } from './telemetry.ts'

const PREFIX = 'pbff_memory_store_'

/** The in-process store (CACHE_MEMORY_MB), as prom-client metrics in `registry`: gauges read when rendered, no sample before there is a store. */
export function storeMetrics (registry: Registry): StoreTelemetry {
  const { readFrom, gauge } = readGauges<StoreHeld>(registry, PREFIX)
  gauge('bytes', 'Heap the in-process store\'s entries take, as it counts them (key, body, tag, encodings, fixed overhead)', (now) => now.bytes)
  gauge('max_bytes', 'The in-process store\'s bound (CACHE_MEMORY_MB)', (now) => now.maxBytes)
  gauge('entries', 'Entries the in-process store holds (without Redis, or while it is away)', (now) => now.entries)
  const freshEvictions = new Counter({
    name: `${PREFIX}fresh_evictions_total`,
    help: 'Entries still fresh pushed out by the in-process store\'s bound: each will be loaded again before its time (raise CACHE_MEMORY_MB)',
    registers: [registry]
  })
  return {
    memoryStore: readFrom,
    freshEviction: () => { freshEvictions.inc() }
  }
}
