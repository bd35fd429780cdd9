import { spawn, type SpawnOptionsWithoutStdio } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

// What these modules' tests need of a child process, without blocking the event loop as spawnSync does: their
// tests run side by side (side-by-side.ts), so other tests go on while a process runs.

export interface Ran {
  /** The exit code; null when the process was killed (as at `timeout`). */
  status: number | null
  stdout: string
  stderr: string
}

/** Runs `command` to its end, as `spawnSync(command, args, { encoding: 'utf8', ...options })` does; rejects when it cannot start. */
export async function run (command: string, args: string[], options: SpawnOptionsWithoutStdio = {}): Promise<Ran> {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  return await new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (status) => resolve({ status, stdout, stderr }))
  })
}

/** Whether an executable `command` is on PATH: whether the tool is installed here, without running it. */
export function onPath (command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}
