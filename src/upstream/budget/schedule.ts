/** Runs `run` in `ms` (the app's timers; tests move a clock instead); returns its cancellation. */
export type Schedule = (ms: number, run: () => void) => () => void

export const realTimers: Schedule = (ms, run) => {
  const timer = setTimeout(run, ms).unref()
  return () => { clearTimeout(timer) }
}
