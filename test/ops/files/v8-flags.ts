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
