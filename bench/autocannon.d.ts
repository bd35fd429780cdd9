// autocannon ships no types: the part of its library API the benchmark uses.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  export interface Histogram {
    average: number
    mean: number
    stddev: number
    min: number
    max: number
    p50: number
    p90: number
    p99: number
  }

  export interface RequestSpec {
    method?: string
    path?: string
    headers?: Record<string, string>
    onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string | string[]>) => void
  }

  export interface Options {
    url: string
    connections?: number
    duration?: number
    amount?: number
    timeout?: number
    pipelining?: number
    overallRate?: number
    requests?: RequestSpec[]
    headers?: Record<string, string>
  }

  export interface Result {
    requests: Histogram
    latency: Histogram
    throughput: Histogram
    duration: number
    errors: number
    timeouts: number
    non2xx: number
    mismatches: number
    statusCodeStats: Record<string, { count: number }>
  }

  export interface Instance extends EventEmitter, PromiseLike<Result> {
    stop: () => void
  }

  function autocannon (options: Options): Instance
  export default autocannon
}
