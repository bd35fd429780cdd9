import { monitorEventLoopDelay } from 'node:perf_hooks'

/**
 * Past this, a stall of the test's process (a busy machine) may change a real-time outcome: cost an instance its owner
 * lock (renewed every third of its second), mark Redis down (500 ms a command), or eat most of a 400 ms margin.
 */
export const STALL_MS = 300

/** Measures from now how long this process stands still; `stop` answers the longest stall, in ms. */
export function stallMeter (): { stop: () => number } {
  const stalls = monitorEventLoopDelay({ resolution: 10 })
  stalls.enable()
  return {
    stop: () => {
      stalls.disable()
      return stalls.max / 1e6
    }
  }
}

interface Instance { redisLayer?: { health: { listen: (listener: (up: boolean) => void) => void } } }

/** What `scenario` gives, and whether this process stood still STALL_MS meanwhile (or Redis was marked down) to excuse a load each. */
export async function excusable<T> (apps: Instance[], scenario: () => Promise<T>): Promise<{ value: T, excused: boolean }> {
  let down = false
  for (const app of apps) app.redisLayer?.health.listen((up) => { if (!up) down = true })
  const meter = stallMeter()
  const value = await scenario()
  return { value, excused: meter.stop() >= STALL_MS || down }
}
