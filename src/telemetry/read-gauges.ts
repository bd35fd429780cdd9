import { Gauge, type Registry } from 'prom-client'

/** Gauges of one source, read when the metrics are rendered: no sample before the source is given (made after the metrics). */
export interface ReadGauges<T> {
  readFrom: (source: () => T) => void
  gauge: (name: string, help: string, pick: (now: T) => number) => void
}

export function readGauges<T> (registry: Registry, prefix: string): ReadGauges<T> {
  let source: (() => T) | undefined
  return {
    readFrom: (read) => { source = read },
    gauge: (name, help, pick) => {
      const metric: Gauge = new Gauge({
        name: `${prefix}${name}`,
        help,
        registers: [registry],
        collect: () => { if (source !== undefined) metric.set(pick(source())) }
      })
    }
  }
}
