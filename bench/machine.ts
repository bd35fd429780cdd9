import { execFileSync } from 'node:child_process'
import { arch, cpus, loadavg, platform } from 'node:os'
import type { BenchResults } from './results.ts'

/** What a report must name to be read later: when, which commit (and whether the tree was clean), which machine. */
export function machineInfo (root: string): BenchResults['machine'] {
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    commit: git(root, ['rev-parse', '--short', 'HEAD']) + (git(root, ['status', '--porcelain']) === '' ? '' : ' (with uncommitted changes)'),
    cores: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: `${platform()} ${arch()}`,
    loadAverage: loadavg()
  }
}

function git (root: string, args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return 'unknown'
  }
}
