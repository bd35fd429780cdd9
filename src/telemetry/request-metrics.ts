import { Histogram, type Registry } from 'prom-client'
import { ScrapedCounter, type CountCell } from './scraped-counter.ts'

const PREFIX = 'pbff_'
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

export type ExemplarLabels = Record<string, string>

/** The answers of one method and route (its pattern, `/profile/:username`, never the URL: one series per route, not per username). */
export interface RequestSeries {
  observe: (status: number, seconds: number) => void
}

/** The requests counter (by method, route and status) and latency histogram (by method and route). */
export class RequestMetrics {
  readonly #requests: ScrapedCounter<'method' | 'route' | 'status'>
  readonly #seconds: Histogram<'method' | 'route'>
  readonly #exemplar: (() => ExemplarLabels | undefined) | undefined

  constructor (registers: Registry[], exemplar: (() => ExemplarLabels | undefined) | undefined) {
    this.#exemplar = exemplar
    this.#requests = new ScrapedCounter({
      name: `${PREFIX}http_requests_total`,
      help: 'Requests answered, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers
    })
    this.#seconds = new Histogram({
      name: `${PREFIX}http_request_duration_seconds`,
      help: 'Time to answer a request, by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: REQUEST_BUCKETS,
      registers,
      enableExemplars: exemplar !== undefined
    })
  }

  /** Made once per method and route, and kept by the caller: a request then counts without a labels object of its own. */
  series (method: string, route: string): RequestSeries {
    const labels = { method, route }
    const counts = new Map<number, CountCell>()
    return {
      observe: (status, seconds) => {
        let cell = counts.get(status)
        if (cell === undefined) counts.set(status, cell = this.#requests.cell({ method, route, status }))
        cell.n++
        // Off, a hit's observation is prom-client's plain call.
        if (this.#exemplar === undefined) this.#seconds.observe(labels, seconds)
        else observeWithExemplar(this.#seconds, labels, seconds, this.#exemplar)
      }
    }
  }
}

/** An exemplar-enabled histogram takes only the object form; empty exemplar labels record none. */
export function observeWithExemplar<T extends string> (
  histogram: Histogram<T>, labels: Partial<Record<T, string>>, seconds: number, exemplar: () => ExemplarLabels | undefined
): void {
  histogram.observe({ labels, value: seconds, exemplarLabels: (exemplar() ?? {}) as Partial<Record<T, string>> })
}
