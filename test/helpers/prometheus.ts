/** One sample of the Prometheus text format: `name{label="value",...} 42`. */
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export function parseMetrics (text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) continue
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key ?? ''] = value ?? ''
    samples.push({ name: match[1] ?? '', labels, value: Number(match[3]) })
  }
  return samples
}

/** The value of the one sample named `name` whose labels include `labels`; undefined when there is none. */
export function metric (samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((sample) => sample.name === name &&
    Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} samples`)
  return found[0]?.value
}
