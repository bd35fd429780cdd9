import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/** What `npm start` runs, relative to the repository root. */
export const SERVER_ENTRY = 'dist/server.js'

/**
 * The node options `npm start` runs the server with (package.json's `start`, `node [options] dist/server.js`), so
 * that the benchmark runs the service exactly as `npm start` does. Any other shape of the script stops the run.
 */
export function npmStartOptions (startScript: string): string[] {
  const match = /^node((?:\s+--[\w-]+(?:=\S+)?)*)\s+dist\/server\.js$/.exec(startScript.trim())
  if (match === null) throw new Error(`package.json's start script is not \`node [options] ${SERVER_ENTRY}\`: ${startScript}`)
  return (match[1] ?? '').split(/\s+/).filter((option) => option !== '')
}

/** npmStartOptions of the repository at `root`. */
export function npmStartOptionsAt (root: string): string[] {
  const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts?: { start?: string } }
  return npmStartOptions(scripts?.start ?? '')
}

/**
 * Builds the service as `npm run build` does (tsc, tsconfig.build.json, into the gitignored dist/), so
 * the benchmark measures what ships: plain `node dist/server.js`, no TypeScript loader in its memory.
 * tsc emits even with type errors; those are the test suite's business, so they are reported, and the
 * run goes on as long as there is a server to start. Returns the number of error lines.
 */
export function buildService (root: string, log: (line: string) => void): number {
  const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000
  })
  const errors = `${tsc.stdout}`.split('\n').filter((line) => line.includes('error TS'))
  if (tsc.error !== undefined) throw new Error(`tsc did not run: ${tsc.error.message}`)
  if (!existsSync(join(root, SERVER_ENTRY))) throw new Error(`tsc produced no ${SERVER_ENTRY}:\n${tsc.stdout}${tsc.stderr}`)
  if (errors.length > 0) log(`warning: the build has ${errors.length} type errors, measuring the JavaScript tsc emitted anyway:\n  ${errors.join('\n  ')}`)
  return errors.length
}
