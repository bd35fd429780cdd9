import { spawnSync } from 'node:child_process'
import t from 'tap'

// src/v8-flags.ts sets V8 flags at start-up (server.ts imports it first). Only Sparkplug's shows from
// JavaScript, through V8's natives syntax: a function called once already has baseline code.
const BASELINE = 1 << 15

t.test('the server\'s V8 flags take effect when set at start-up: baseline code on a function\'s first call', async (t) => {
  const status = (flags: boolean): number => {
    const script = `${flags ? "await import('./src/v8-flags.ts');" : ''} const f = new Function('a', 'return a + 1'); f(1); console.log(%GetOptimizationStatus(f))`
    const run = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script], { encoding: 'utf8' })
    if (run.status !== 0) throw new Error(run.stderr)
    return Number(run.stdout.trim())
  }
  t.equal(status(false) & BASELINE, 0, 'without them, a function called once is still interpreted')
  t.equal(status(true) & BASELINE, BASELINE, 'with them, it has baseline code')
})

t.test('the heap\'s sizes are fixed before any JavaScript runs: NODE_OPTIONS sets them, v8-flags.ts could not', async (t) => {
  const limit = (nodeOptions: string, script = ''): number => {
    const run = spawnSync(process.execPath, ['-p', `${script} v8.getHeapStatistics().heap_size_limit`], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: nodeOptions } })
    if (run.status !== 0) throw new Error(run.stderr)
    return Number(run.stdout.trim())
  }
  const mib = 1024 * 1024
  t.equal(limit('--max-old-space-size=128 --max-semi-space-size=16') / mib, 128 + 3 * 16, 'at start-up: the old generation and three semi-spaces')
  t.equal(limit('', 'v8.setFlagsFromString(\'--max-old-space-size=128\'); v8.setFlagsFromString(\'--max-semi-space-size=16\');'), limit(''), 'at run time: no change')
})
