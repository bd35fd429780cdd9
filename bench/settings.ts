/** An integer from the environment, within bounds (every loop of the benchmark stays bounded). */
export function integerSetting (name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer from ${min} to ${max}, got ${raw}`)
  return value
}
