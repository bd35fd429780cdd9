import { Counter, type CounterConfiguration, type LabelValues } from 'prom-client'

/** One series' count since the last scrape: whoever counts keeps the cell and adds to `n`. */
export interface CountCell {
  n: number
}

/**
 * A prom-client counter whose counts are plain numbers until scraped: its `collect` hands them over.
 * Counting through `inc(labels)` validates and hashes a labels object on every call, which a hit did
 * twice (bench/README.md's device table); a caller finds its series' cell once and then only adds.
 */
export class ScrapedCounter<L extends string> extends Counter<L> {
  readonly #cells: Array<{ labels: LabelValues<L>, cell: CountCell }> = []

  constructor (configuration: CounterConfiguration<L>) {
    // prom-client calls `collect` on the metric itself, before each scrape.
    super({ ...configuration, collect () { (this as ScrapedCounter<L>).#handOver() } })
  }

  /** A new series' cell: make it once per series and keep it. */
  cell (labels: LabelValues<L>): CountCell {
    const cell = { n: 0 }
    this.#cells.push({ labels, cell })
    return cell
  }

  #handOver (): void {
    for (const { labels, cell } of this.#cells) {
      if (cell.n > 0) this.inc(labels, cell.n)
      cell.n = 0
    }
  }
}
