import t from 'tap'
import { run } from './run.ts'

// src/v8-flags.ts sets V8 flags at start-up (server.ts imports it first). Only Sparkplug's shows from
// JavaScript, through V8's natives syntax: a function called once already has baseline code.
const BASELINE = 1 << 15

t.test('the server\'s V8 flags take effect when set at start-up: baseline code on a function\'s first call', async (t) => {
  const status = async (flags: boolean): Promise<number> => {
    const script = `${flags ? "await import('./src/v8-flags.ts');" : ''} const f = new Function('a', 'return a + 1'); f(1); console.log(%GetOptimizationStatus(f))`
    const ran = await run(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script])
    if (ran.status !== 0) throw new Error(ran.stderr)
    return Number(ran.stdout.trim())
  }
  const [without, withFlags] = await Promise.all([status(false), status(true)])
  t.equal(without & BASELINE, 0, 'without them, a function called once is still interpreted')
  t.equal(withFlags & BASELINE, BASELINE, 'with them, it has baseline code')
})

t.test('the heap\'s sizes are fixed before any JavaScript runs: NODE_OPTIONS sets them, v8-flags.ts could not', async (t) => {
  const limit = async (nodeOptions: string, script = ''): Promise<number> => {
    const ran = await run(process.execPath, ['-p', `${script} v8.getHeapStatistics().heap_size_limit`], { env: { ...process.env, NODE_OPTIONS: nodeOptions } })
    if (ran.status !== 0) throw new Error(ran.stderr)
    return Number(ran.stdout.trim())
  }
  const mib = 1024 * 1024
  const [atStartUp, atRunTime, asIs] = await Promise.all([
    limit('--max-old-space-size=128 --max-semi-space-size=16'),
    limit('', 'v8.setFlagsFromString(\'--max-old-space-size=128\'); v8.setFlagsFromString(\'--max-semi-space-size=16\');'),
    limit('')
  ])
  t.equal(atStartUp / mib, 128 + 3 * 16, 'at start-up: the old generation and three semi-spaces')
  t.equal(atRunTime, asIs, 'at run time: no change')
})
