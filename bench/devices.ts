import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildService } from './build.ts'
import { applyVariant, VARIANTS, type Variant } from './device-variants.ts'
import { assertWrkInstalled, runRound, stopRunningLoad, type RoundResult } from './load.ts'
import { warm } from './phases.ts'
import { ProcessGroup, type RunningChild } from './processes.ts'
import { isValid } from './rounds.ts'
import { integerSetting } from './settings.ts'
import { median } from './stats.ts'
import { startService, startSimulator } from './targets.ts'

// `npm run bench:devices`: what each device of the hit path saves, and what each production default costs, in µs of
// server CPU per hit (bench/README.md, "Devices on the hit path"). Every variant (device-variants.ts) is the built
// service with one edit; each runs in several processes, since one process of the same build lands anywhere in a
// band of a few µs; the rounds are interleaved, and each variant's round is paired with the service's in the same
// process slot and round. The service runs from an unedited copy, beside the variants', so the edit is the only difference.

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '')
const PROCESSES = integerSetting('BENCH_DEVICE_PROCESSES', 3, 1, 10)
const ROUNDS = integerSetting('BENCH_ROUNDS', 3, 1, 20)
const SECONDS = integerSetting('BENCH_ROUND_SECONDS', 4, 1, 30)
const CONNECTIONS = integerSetting('BENCH_CONNECTIONS', 50, 1, 500)
const WARM_UP_SECONDS = 2
const requested = (process.env.BENCH_VARIANTS ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '')
const unknown = requested.filter((name) => !VARIANTS.some((variant) => variant.name === name))
if (unknown.length > 0) throw new Error(`BENCH_VARIANTS: no variant ${unknown.join(', ')} (the variants: ${VARIANTS.map(({ name }) => name).join(', ')})`)
const variants = VARIANTS.filter(({ name }) => requested.length === 0 || requested.includes(name))
const DEADLINE_MS = 120_000 + (1 + variants.length) * PROCESSES * (15_000 + 1_500 * (WARM_UP_SECONDS + ROUNDS * SECONDS))

const workDir = mkdtempSync(join(tmpdir(), 'pbff-devices-'))
const group = new ProcessGroup({ root: ROOT, logDir: workDir })
const log = (line: string): void => { process.stdout.write(`${line}\n`) }
/** Set once the run is being stopped (a signal, the deadline): the load it kills is no failure to report. */
let stopping = false

process.on('exit', (code) => {
  group.killAllNow()
  // A failed run keeps its children's stderr, which its message points to.
  if (code === 0) rmSync(workDir, { recursive: true, force: true })
})
process.once('SIGINT', () => { stop(130) })
process.once('SIGTERM', () => { stop(143) })
setTimeout(() => { log(`the run took longer than ${DEADLINE_MS / 1000} s: stopping`); stop(1) }, DEADLINE_MS).unref()

interface Build { variant: Variant | undefined, entry: string }
interface Slot { variant: Variant | undefined, server: RunningChild, rounds: RoundResult[] }

try {
  assertWrkInstalled()
  buildService(ROOT, log)
  // Bare specifiers in a copy of dist/ resolve through this link to the project's own packages; its modules are ESM, as in the project.
  symlinkSync(join(ROOT, 'node_modules'), join(workDir, 'node_modules'))
  writeFileSync(join(workDir, 'package.json'), JSON.stringify({ type: 'module' }))
  const builds: Build[] = [undefined, ...variants].map((variant) => ({ variant, entry: copyOfDist(variant) }))
  const simulator = await startSimulator(group, 0)
  const paths = Array.from({ length: 100 }, (_, index) => `/profile/hit-${index}`)
  const slots: Slot[][] = []
  for (let copy = 0; copy < PROCESSES; copy++) {
    const row: Slot[] = []
    for (const { variant, entry } of builds) {
      const server = await startService(group, { name: `${variant?.name ?? 'service'}-${copy}`, simulator, logLevel: 'info', entry, env: variant?.env ?? {} })
      await warm(server, paths)
      row.push({ variant, server, rounds: [] })
    }
    slots.push(row)
  }
  log(`${variants.length} variants and the service, ${PROCESSES} processes each; warming up`)
  for (const slot of slots.flat()) await runRound({ url: slot.server.url, cpu: slot.server.cpu }, paths, { connections: CONNECTIONS, seconds: WARM_UP_SECONDS })
  for (let round = 0; round < ROUNDS; round++) {
    for (const row of slots) {
      // Alternating the order: no variant always follows the same neighbour.
      for (const slot of round % 2 === 0 ? row : [...row].reverse()) {
        const result = await runRound({ url: slot.server.url, cpu: slot.server.cpu }, paths, { connections: CONNECTIONS, seconds: SECONDS })
        // A variant that fails requests would look cheap: it is a broken edit, not a figure.
        if (result.errors > 0 || result.non2xx > 0) throw new Error(`${slot.server.name}: ${result.errors} errors and ${result.non2xx} answers of 400 or more in a round`)
        slot.rounds.push(result)
      }
    }
    log(`round ${round + 1} of ${ROUNDS} done`)
  }
  log(report(slots))
} catch (error) {
  if (!stopping) {
    process.stderr.write(`bench:devices failed: ${(error as Error).stack ?? String(error)}\nchildren's stderr: ${workDir}\n`)
    process.exitCode = 1
  }
} finally {
  await group.stopAll()
}
if (!stopping) process.exit()

/** A copy of dist/ with the variant's edits (none for the service); returns its server entry. */
function copyOfDist (variant: Variant | undefined): string {
  const dir = join(workDir, variant?.name ?? 'service')
  cpSync(join(ROOT, 'dist'), dir, { recursive: true })
  if (variant !== undefined) applyVariant(dir, variant)
  return join(dir, 'server.js')
}

/**
 * The table: each variant's µs per hit over the service's, the median over the pairs of rounds (same process slot,
 * same round) in which both were valid; each process's own median beside it, for the spread.
 */
function report (slots: Slot[][]): string {
  const pairs = PROCESSES * ROUNDS
  const lines = [
    `| variant | kind | the service | instead | µs per hit, variant - service (median of the valid pairs, of ${pairs}) | µs per hit, each process's median | req/s |`,
    '|---|---|---|---|---:|---|---:|'
  ]
  const columns = slots[0]?.length ?? 0
  for (let index = 0; index < columns; index++) {
    const differences: number[] = []
    for (const row of slots) {
      const [service, slot] = [row[0], row[index]]
      slot?.rounds.forEach((round, at) => {
        const base = service?.rounds[at]
        if (base !== undefined && isValid(round) && isValid(base)) differences.push(round.serverCpuUs - base.serverCpuUs)
      })
    }
    const column = slots.flatMap((row) => row[index] ?? [])
    const variant = column[0]?.variant
    const perProcess = column.map((slot) => median(slot.rounds.map((round) => round.serverCpuUs)).toFixed(1)).join(', ')
    const rps = median(column.flatMap((slot) => slot.rounds.map((round) => round.requestsPerSecond)))
    const difference = variant === undefined ? '' : `${signed(median(differences))} (${differences.length} pairs)`
    lines.push(`| ${variant?.name ?? 'service (as it ships)'} | ${variant?.kind ?? ''} | ${variant?.what ?? ''} | ${variant?.instead ?? ''} | ` +
      `${difference} | ${perProcess} | ${Math.round(rps).toLocaleString('en-US')} |`)
  }
  return lines.join('\n')
}

function signed (value: number): string {
  return `${value >= 0 ? '+' : ''}${value.toFixed(2)}`
}

function stop (exitCode: number): void {
  stopping = true
  stopRunningLoad()
  group.stopAll().finally(() => process.exit(exitCode))
}
