import { performance } from 'node:perf_hooks'

/** What `work` gave, and how long it took in ms (a measurement for Server-Timing, not a clock to decide by). */
export async function timed<T> (work: () => Promise<T>): Promise<{ value: T, ms: number }> {
  const started = performance.now()
  const value = await work()
  return { value, ms: performance.now() - started }
}
