import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildService } from './build.ts'
import { applyPatches, VARIANTS, type Variant } from './device-variants.ts'
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
// process slot and round.

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '')
const PROCESSES = integerSetting('BENCH_DEVICE_PROCESSES', 3, 1, 10)
const ROUNDS = integerSetting('BENCH_ROUNDS', 3, 1, 20)
const SECONDS = integerSetting('BENCH_ROUND_SECONDS', 4, 1, 30)
const CONNECTIONS = integerSetting('BENCH_CONNECTIONS', 50, 1, 500)
const WARM_UP_SECONDS = 2
const only = (process.env.BENCH_VARIANTS ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '')
const unknown = only.filter((name) => !VARIANTS.some((variant) => variant.name === name))
if (unknown.length > 0) throw new Error(`BENCH_VARIANTS: no variant ${unknown.join(', ')} (the variants: ${VARIANTS.map(({ name }) => name).join(', ')})`)
const variants = VARIANTS.filter(({ name }) => only.length === 0 || only.includes(name))
const DEADLINE_MS = 120_000 + (1 + variants.length) * PROCESSES * (15_000 + 1_500 * (WARM_UP_SECONDS + ROUNDS * SECONDS))

const workDir = mkdtempSync(join(tmpdir(), 'pbff-devices-'))
const group = new ProcessGroup({ root: ROOT, logDir: workDir })
const log = (line: string): void => { process.stdout.write(`${line}\n`) }

process.on('exit', () => {
  group.killAllNow()
  rmSync(workDir, { recursive: true, force: true })
})
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => { stop(130) })
setTimeout(() => { log(`the run took longer than ${DEADLINE_MS / 1000} s: stopping`); stop(1) }, DEADLINE_MS).unref()

interface Slot { variant: Variant | undefined, server: RunningChild, rounds: RoundResult[] }

try {
  assertWrkInstalled()
  buildService(ROOT, log)
  // Bare specifiers in a copy of dist/ resolve through this link to the project's own packages.
  symlinkSync(join(ROOT, 'node_modules'), join(workDir, 'node_modules'))
  const entries = new Map(variants.map((variant) => [variant.name, buildVariant(variant)]))
  const simulator = await startSimulator(group, 0)
  const paths = Array.from({ length: 100 }, (_, index) => `/profile/hit-${index}`)
  const slots: Slot[][] = []
  for (let copy = 0; copy < PROCESSES; copy++) {
    const row: Slot[] = []
    for (const variant of [undefined, ...variants]) {
      const name = `${variant?.name ?? 'service'}-${copy}`
      const server = await startService(group, { name, simulator, logLevel: 'info', ...(variant !== undefined && { entry: entries.get(variant.name) as string, env: variant.env ?? {} }) })
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
        slot.rounds.push(await runRound({ url: slot.server.url, cpu: slot.server.cpu }, paths, { connections: CONNECTIONS, seconds: SECONDS }))
      }
    }
    log(`round ${round + 1} of ${ROUNDS} done`)
  }
  log(report(slots))
} catch (error) {
  process.stderr.write(`bench:devices failed: ${(error as Error).stack ?? String(error)}\nchildren's stderr: ${workDir}\n`)
  process.exitCode = 1
} finally {
  await group.stopAll()
}
process.exit()

/** A copy of dist/ with the variant's edits; returns its server entry. */
function buildVariant (variant: Variant): string {
  const dir = join(workDir, variant.name)
  cpSync(join(ROOT, 'dist'), dir, { recursive: true })
  for (const file of new Set(variant.patches.map((patch) => patch.file))) {
    const path = join(dir, file)
    writeFileSync(path, applyPatches(readFileSync(path, 'utf8'), variant.patches.filter((patch) => patch.file === file), variant.name))
  }
  return join(dir, 'server.js')
}

/** The table: each variant's µs per hit over the service's, the median of its rounds paired with the service's. */
function report (slots: Slot[][]): string {
  const service = slots.map((row) => row[0] as Slot)
  const lines = [
    `| variant | kind | the service | instead | µs per hit, variant - service (median of ${PROCESSES * ROUNDS} pairs) | µs per hit, each process's median | req/s | valid rounds |`,
    '|---|---|---|---|---:|---|---:|---:|'
  ]
  for (let index = 0; index < (slots[0]?.length ?? 0); index++) {
    const column = slots.map((row) => row[index] as Slot)
    const variant = column[0]?.variant
    const differences = column.flatMap((slot, copy) => slot.rounds.map((round, at) => round.serverCpuUs - ((service[copy] as Slot).rounds[at] as RoundResult).serverCpuUs))
    const rounds = column.flatMap((slot) => slot.rounds)
    const perProcess = column.map((slot) => median(slot.rounds.map((round) => round.serverCpuUs)).toFixed(1)).join(', ')
    const valid = rounds.filter(isValid).length
    lines.push(`| ${variant?.name ?? 'service (as it ships)'} | ${variant?.kind ?? ''} | ${variant?.what ?? ''} | ${variant?.instead ?? ''} | ` +
      `${variant === undefined ? '' : signed(median(differences))} | ${perProcess} | ${Math.round(median(rounds.map((round) => round.requestsPerSecond))).toLocaleString('en-US')} | ${valid} of ${rounds.length} |`)
  }
  return lines.join('\n')
}

function signed (value: number): string {
  return `${value >= 0 ? '+' : ''}${value.toFixed(2)}`
}

function stop (exitCode: number): void {
  stopRunningLoad()
  group.stopAll().finally(() => process.exit(exitCode))
}
