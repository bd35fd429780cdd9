/** The parts of V8's .cpuprofile (what `node --cpu-prof` writes) the summary reads. */
export interface CpuProfile {
  nodes: Array<{
    id: number
    callFrame: { functionName: string, url: string, lineNumber: number }
    children?: number[]
  }>
  samples: number[]
  /** Microseconds before each sample. */
  timeDeltas: number[]
}

export interface Cost {
  name: string
  ms: number
  /** Of the busy time (idle excluded). */
  share: number
}

export interface ProfileSummary {
  busyMs: number
  idleMs: number
  /** Functions by self time. */
  topSelf: Cost[]
  /**
   * Where the busy time goes by area (a package, our code, GC), with the time of node core and native
   * frames charged to the nearest package or our frame that called them: a socket write made by
   * Fastify's reply counts for Fastify, a log line's write for sonic-boom. Node core only keeps
   * what no package asked for (HTTP parsing, the event loop).
   */
  areasBlamed: Cost[]
  /** Our own functions, charged the same way: what each costs by itself and through node core. */
  oursBlamed: Cost[]
}

/** Frames that do work on someone else's behalf: their time is charged to the caller. */
const RUNTIME_AREAS = new Set(['node core', '(native)', '(program)'])

/** A node_modules package, `node core`, `our code` (src/ or dist/), or V8's own pseudo-frames. */
export function areaOf (url: string, functionName: string, root: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)'
  if (url.startsWith('node:')) return 'node core'
  const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
  if (inPackage?.[1] !== undefined) return inPackage[1]
  const path = url.replace(/^file:\/\//, '')
  if (path.startsWith(`${root}/src/`) || path.startsWith(`${root}/dist/`)) return 'our code'
  return 'other'
}

/**
 * `lastMs`: only the samples of the profile's last milliseconds (the load, not the start-up before it);
 * unset: all of them.
 */
export function summarizeProfile (profile: CpuProfile, root: string, { lastMs, limit = 20 }: { lastMs?: number, limit?: number } = {}): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parentOf = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)
  const label = (id: number): string => {
    const { functionName, url, lineNumber } = byId.get(id)?.callFrame ?? { functionName: '?', url: '', lineNumber: 0 }
    const file = url.replace(/^file:\/\//, '').replace(`${root}/`, '')
    return `${functionName === '' ? '(anonymous)' : functionName}${file === '' ? '' : ` ${file}:${lineNumber + 1}`}`
  }
  const area = (id: number): string => {
    const frame = byId.get(id)?.callFrame
    return frame === undefined ? 'other' : areaOf(frame.url, frame.functionName, root)
  }

  const self = new Map<string, number>()
  const areasBlamed = new Map<string, number>()
  const oursBlamed = new Map<string, number>()
  let idleMs = 0
  let busyMs = 0
  const durationMs = profile.timeDeltas.reduce((sum, delta) => sum + delta, 0) / 1000
  let atMs = 0
  profile.samples.forEach((id, index) => {
    const ms = (profile.timeDeltas[index] ?? 0) / 1000
    atMs += ms
    if (lastMs !== undefined && atMs < durationMs - lastMs) return
    if (area(id) === '(idle)') {
      idleMs += ms
      return
    }
    busyMs += ms
    add(self, label(id), ms)
    let blamed = id
    for (let frame = parentOf.get(id); RUNTIME_AREAS.has(area(blamed)) && frame !== undefined; frame = parentOf.get(frame)) {
      if (area(frame) !== '(root)') blamed = frame
    }
    add(areasBlamed, area(blamed), ms)
    if (area(blamed) === 'our code') add(oursBlamed, label(blamed), ms)
  })
  const ranked = (costs: Map<string, number>): Cost[] => [...costs]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, ms]) => ({ name, ms, share: busyMs === 0 ? 0 : ms / busyMs }))
  return {
    busyMs,
    idleMs,
    topSelf: ranked(self),
    areasBlamed: ranked(areasBlamed),
    oursBlamed: ranked(oursBlamed)
  }
}

function add (costs: Map<string, number>, name: string, ms: number): void {
  costs.set(name, (costs.get(name) ?? 0) + ms)
}

/** The summary as text; `requests` served during the profile gives each cost per request too. */
export function renderSummary (title: string, summary: ProfileSummary, requests: number): string {
  const table = (heading: string, costs: Cost[]): string[] => [
    '',
    heading,
    ...costs.map((cost) =>
      `  ${(cost.share * 100).toFixed(1).padStart(5)}%  ${cost.ms.toFixed(0).padStart(6)} ms  ${((cost.ms * 1000) / requests).toFixed(1).padStart(6)} µs/req  ${cost.name}`)
  ]
  return [
    `${title}: ${summary.busyMs.toFixed(0)} ms busy (${((summary.busyMs * 1000) / requests).toFixed(1)} µs per request), ${summary.idleMs.toFixed(0)} ms idle`,
    ...table('areas (node core and native time charged to the package or our function that called it):', summary.areasBlamed),
    ...table('functions, self time:', summary.topSelf),
    ...table('our functions, charged the same way:', summary.oursBlamed),
    ''
  ].join('\n')
}
