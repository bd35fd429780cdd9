import type { Metric, Registry } from 'prom-client'

/** One label set's observations: counts per bucket (not cumulative; the last is past every bound), sum and count. */
export interface HistogramSeries {
  readonly counts: number[]
  sum: number
  count: number
}

interface ExportedValue { metricName: string, labels: Record<string, string | number>, value: number }

/**
 * A Prometheus histogram whose series are plain numbers: an observation is a walk over the bounds and
 * three additions, where prom-client's `observe` validates and hashes the labels on every call (every
 * request observes one). prom-client still renders it, from the values `get()` gives, as it renders its own.
 */
export class PlainHistogram<L extends string> {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  readonly name: string
  readonly help: string
  readonly #bounds: readonly number[]
  readonly #series: Array<{ labels: Record<L, string>, series: HistogramSeries }> = []

  constructor ({ name, help, buckets, registers }: { name: string, help: string, buckets: readonly number[], registers: Registry[] }) {
    this.name = name
    this.help = help
    this.#bounds = buckets
    // prom-client renders any object of this shape; its types only name its own classes.
    for (const registry of registers) registry.registerMetric(this as unknown as Metric)
  }

  /** A new series for these labels: keep it, and observe into it. */
  series (labels: Record<L, string>): HistogramSeries {
    const series: HistogramSeries = { counts: new Array<number>(this.#bounds.length + 1).fill(0), sum: 0, count: 0 }
    this.#series.push({ labels, series })
    return series
  }

  observe (series: HistogramSeries, value: number): void {
    let bucket = 0
    while (bucket < this.#bounds.length && value > (this.#bounds[bucket] as number)) bucket++
    series.counts[bucket] = (series.counts[bucket] ?? 0) + 1
    series.sum += value
    series.count++
  }

  /** The exposition's values, as prom-client's registry reads them from a metric. */
  async get (): Promise<{ name: string, help: string, type: string, aggregator: string, values: ExportedValue[] }> {
    const values: ExportedValue[] = []
    for (const { labels, series } of this.#series) {
      let cumulative = 0
      this.#bounds.forEach((le, bucket) => {
        cumulative += series.counts[bucket] ?? 0
        values.push({ metricName: `${this.name}_bucket`, labels: { le, ...labels }, value: cumulative })
      })
      values.push(
        { metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...labels }, value: series.count },
        { metricName: `${this.name}_sum`, labels, value: series.sum },
        { metricName: `${this.name}_count`, labels, value: series.count }
      )
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }
}
