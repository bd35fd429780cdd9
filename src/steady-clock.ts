import { performance } from 'node:perf_hooks'

/** Read once: the getter costs on a clock read a few times a request. */
const ORIGIN = performance.timeOrigin

/**
 * The app's clock: the wall time at the process's start, moved on by the monotonic clock. A step of the host's clock
 * (NTP stepping it, someone setting it) then neither ages nor refreshes what the instance holds, nor moves its times on
 * Redis's clock (the offset measured at connection stays true). What is compared with wall time from elsewhere (an
 * HTTP date) is read against that wall time, not this clock.
 */
export function steadyNow (): number {
  return Math.floor(ORIGIN + performance.now())
}
