import { performance } from 'node:perf_hooks'
import type { RunningChild } from './processes.ts'

/** In ms: each named child's CPU (every thread), this process's (`generator`), and the wall time. */
export type CpuUsed<Name extends string> = Record<Name | 'generator' | 'wall', number>

/** Starts counting now; the function returned tells what each has used since. */
export function cpuMeter<Name extends string> (children: Record<Name, RunningChild>): () => CpuUsed<Name> {
  const names = Object.keys(children) as Name[]
  const read = (): CpuUsed<Name> => {
    const { user, system } = process.cpuUsage()
    const used = { generator: (user + system) / 1000, wall: performance.now() } as CpuUsed<Name>
    for (const name of names) used[name] = children[name].cpu()?.processMs ?? 0
    return used
  }
  const before = read()
  return () => {
    const now = read()
    for (const key of Object.keys(now) as Array<keyof CpuUsed<Name>>) now[key] -= before[key]
    return now
  }
}
