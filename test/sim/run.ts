import { send, type Answer } from './answers.ts'
import type { Call, Fleet } from './fleet.ts'
import { budgetWindows, callBound, expectedAnswer, hitFreshness, purgeKept, type Violation } from './invariants.ts'
import type { Request, Schedule, Step } from './schedule.ts'

// Runs a schedule's steps one after another on a fleet, checking the invariants after each.

interface StepOutcome {
  step: number
  kind: Step['kind']
  /** Deployment clock, ms from the run's start. */
  at: number
  /** Real time the step took: what makes a seed slow. */
  realMs?: number
  /** Each instance's offset measurements to Redis's clock so far (see `Fleet.resyncs`). */
  resyncs?: number[]
  answers?: Array<Pick<Answer, 'instance' | 'url' | 'status' | 'cache' | 'ageS' | 'calls'> & { code?: string }>
  status?: number
}

export interface RunResult {
  outcomes: StepOutcome[]
  violations: Violation[]
  upstreamCalls: Record<string, number>
  /** Each upstream call, on the schedule's clock: when a bound broke, which calls broke it. */
  callLog: Call[]
}

export async function runSchedule (fleet: Fleet, { settings, steps }: Schedule): Promise<RunResult> {
  const outcomes: StepOutcome[] = []
  const violations: Violation[] = []
  for (const [index, step] of steps.entries()) {
    await fleet.keepBusLost()
    const outcome: StepOutcome = { step: index, kind: step.kind, at: fleet.now() - fleet.startedAt }
    const started = performance.now()
    const answers = await perform(fleet, step, outcome)
    outcome.realMs = Math.round(performance.now() - started)
    outcome.resyncs = [...fleet.resyncs]
    for (const answer of answers) {
      violations.push(...expectedAnswer(answer, index), ...hitFreshness(fleet, settings, answer, index), ...purgeKept(fleet, answer, index))
    }
    if (answers.length > 0) outcome.answers = answers.map(({ instance, url, status, code, cache, ageS, calls }) => ({ instance, url, status, ...(code !== undefined && { code }), ...(cache !== undefined && { cache }), ...(ageS !== undefined && { ageS }), calls }))
    outcomes.push(outcome)
    violations.push(...callBound(fleet, settings, index), ...budgetWindows(fleet, settings, index))
  }
  return { outcomes, violations: firstOfEach(violations), upstreamCalls: Object.fromEntries(fleet.sim.stats.calls), callLog: [...fleet.calls] }
}

async function perform (fleet: Fleet, step: Step, outcome: StepOutcome): Promise<Answer[]> {
  switch (step.kind) {
    case 'requests': return await all(fleet, step.requests)
    case 'pause': return await fleet.pause(async () => await all(fleet, step.requests))
    case 'advance': await fleet.advance(step.ms); return []
    case 'purge': outcome.status = await fleet.purge(step.instance, step.username); return []
    case 'bus-loss': await fleet.busLoss(true); return []
    case 'bus-back': await fleet.busLoss(false); return []
    case 'kill': await fleet.kill(); return []
    case 'restart': await fleet.restart(); return []
    case 'flush': await fleet.flush(); return []
  }
}

async function all (fleet: Fleet, requests: Request[]): Promise<Answer[]> {
  return await Promise.all(requests.map(async (request) => await send(fleet, request)))
}

/** A bound broken once stays broken: the first step that broke each invariant for each subject is what tells. */
function firstOfEach (violations: Violation[]): Violation[] {
  const seen = new Set<string>()
  return violations.filter(({ invariant, detail }) => {
    const subject = `${invariant} ${detail.split(':', 1)[0] ?? ''}`
    if (seen.has(subject)) return false
    seen.add(subject)
    return true
  })
}
