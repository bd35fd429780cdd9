/** An integer from the environment, within bounds (every loop of the benchmark stays bounded). */
export function integerSetting (name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer from ${min} to ${max}, got ${raw}`)
  return value
}

/** The benchmark's phases, in the order a run takes them. */
export const PHASES = ['zipf', 'herd', 'list', 'hit', 'miss', 'trouble', 'scan', 'budget', 'tracing', 'coherence', 'scenarios', 'soak'] as const
export type Phase = typeof PHASES[number]
/** Run only when named: the soak alone takes BENCH_SOAK_SECONDS (5 minutes by default). */
export const OPT_IN_PHASES: readonly Phase[] = ['soak']

/** A comma-separated list of phases from the environment (`BENCH_PHASES=hit`); unset or empty: all of them but the opt-in ones. */
export function phaseSetting (name: string, raw = process.env[name]): Phase[] {
  if (raw === undefined || raw.trim() === '') return PHASES.filter((phase) => !OPT_IN_PHASES.includes(phase))
  const asked = raw.split(',').map((phase) => phase.trim()).filter((phase) => phase !== '')
  const unknown = asked.filter((phase) => !(PHASES as readonly string[]).includes(phase))
  if (unknown.length > 0) throw new Error(`${name}: unknown phase ${unknown.join(', ')} (the phases: ${PHASES.join(', ')})`)
  return PHASES.filter((phase) => asked.includes(phase))
}
