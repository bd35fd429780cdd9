import { hungProvider, type HungProviderRun } from './hung-provider.ts'
import { count, ms, statuses } from './format.ts'
import type { ProcessGroup } from './processes.ts'
import type { BenchResults } from './results.ts'
import { slowUpstream, type SlowUpstreamRun } from './slow-upstream.ts'

// Issue 32's failure scenarios, with the service's defaults: a slow upstream (point 2) and a hung identity provider
// (point 3). Loopback only; each starts its own processes and stops them; the Redis keys are under the run's prefix.

export interface ScenariosResult {
  slow: SlowUpstreamRun[]
  /** The provider back: answering the connections it held (resumed), then only new ones (the held ones dead). */
  hungProvider: HungProviderRun[]
}

/** Two slow upstreams (one at the default timeout, one at 2 s), then the hung provider twice: about 3 minutes. */
export const SCENARIOS_DEADLINE_MS = 300_000

export async function scenariosPhase (
  { group, logLevel, redisUrl, keyPrefix, log }: { group: ProcessGroup, logLevel: string, redisUrl: string, keyPrefix: string, log: (line: string) => void }
): Promise<ScenariosResult> {
  const cases = [
    { latencyMs: 4_500, callers: 500, concurrency: 50 },
    { latencyMs: 1_850, timeoutMs: 2_000, callers: 10, concurrency: 10 }
  ]
  const slow: SlowUpstreamRun[] = []
  for (const scenario of cases) {
    log(`slow upstream: ${scenario.latencyMs} ms, UPSTREAM_TIMEOUT_MS ${scenario.timeoutMs ?? 'default'}, ${scenario.callers} cold usernames ${scenario.concurrency} at a time, then again`)
    slow.push(await slowUpstream({ group, logLevel, scenario, name: `slow-${scenario.latencyMs}` }))
  }
  const hung: HungProviderRun[] = []
  for (const resume of [true, false]) {
    const settings = { callers: 10, hungSeconds: 15, recoverySeconds: 15, fastMs: 200, resume }
    log(`hung identity provider: two instances on one Redis, no token, ${settings.callers} closed-loop callers for ${settings.hungSeconds} s,` +
      ` then the provider answers again (${resume ? 'the connections it held too' : 'new connections only'})`)
    hung.push(await hungProvider({ group, logLevel, redis: { url: redisUrl, keyPrefix: `${keyPrefix}hung-provider-${hung.length}:` }, settings }))
  }
  return { slow, hungProvider: hung }
}

export function scenariosSection ({ scenarios }: BenchResults): string[] {
  if (scenarios === undefined) return []
  const runs = scenarios.hungProvider
  const first = runs[0]
  const ask = (figures: SlowUpstreamRun['first']): string =>
    `${statuses(figures.statuses)} | ${statuses(figures.codes)} | ${statuses(figures.xCache)} | ${ms(figures.p50Ms)} / ${ms(figures.maxMs)} | ${count(figures.calls)}`
  const row = (label: string, value: (run: HungProviderRun) => string): string => `| ${label} | ${runs.map(value).join(' | ')} |`
  return [
    '',
    '## Failure scenarios (issue 32, points 2 and 3), default settings',
    '',
    'Slow upstream: one fresh instance (in-process store), distinct cold usernames on `/profile/u`, some at a time; then, once every' +
      ' call sent has had time to land, the same usernames again. Upstream calls are counted per ask, the late landings included.',
    '',
    '| upstream latency / UPSTREAM_TIMEOUT_MS | callers (at a time) | ask | statuses | error codes | X-Cache | p50 / max | upstream calls |',
    '|---|---:|---|---|---|---|---|---:|',
    ...scenarios.slow.flatMap((run) => [
      `| ${ms(run.latencyMs)} / ${run.timeoutMs === undefined ? 'default' : ms(run.timeoutMs)} | ${run.callers} (${run.concurrency}) | first | ${ask(run.first)} |`,
      `| | | second | ${ask(run.second)} |`
    ]),
    ...(first === undefined
      ? []
      : [
          '',
          'Hung identity provider: it accepts and never answers (a TCP gate of the bench\'s own as AUTH_URL); two fresh instances on one Redis,' +
            ` no token held, ${first.callers} closed-loop callers (each asks one cold username after another, alternating instances) for` +
            ` ${first.hungSeconds} s; then it answers again, for ${first.recoverySeconds} s at most (the callers stop at the first 200).`,
          '',
          `| measure | ${runs.map((run) => run.resume ? 'back, answering what it held too' : 'back, new connections only').join(' | ')} |`,
          `|---|${runs.map(() => '---:').join('|')}|`,
          row('answers while hung / statuses', (run) => `${count(run.hung.answers)} / ${statuses(run.hung.statuses)}`),
          row('their p50 / p99', (run) => `${ms(run.hung.p50Ms)} / ${ms(run.hung.p99Ms)}`),
          row('first failure answered after', (run) => ms(run.firstFailureMs)),
          row(`requests started after it: answered within ${first.fastMs} ms`, (run) =>
            `${count(run.afterFirstFailure.fast)} of ${count(run.afterFirstFailure.requests)} (${(100 * run.afterFirstFailure.fast / run.afterFirstFailure.requests).toFixed(1)}%)`),
          row('connections held while hung', (run) => String(run.exchangesHeld)),
          row('provider back: first 200 after', (run) => Number.isNaN(run.firstOkAfterOpenMs) ? `none in ${run.recoverySeconds} s` : ms(run.firstOkAfterOpenMs)),
          row('... new connections / token requests until then', (run) => `${run.connectionsAfterOpen} / ${run.tokenRequestsAfterOpen}`)
        ])
  ]
}

export function scenariosVerdicts ({ scenarios }: BenchResults): Array<{ target: string, goal: string, measured: string, pass: boolean | undefined }> {
  if (scenarios === undefined) return []
  return [
    ...scenarios.hungProvider.flatMap((hung) => {
      const fastShare = hung.afterFirstFailure.fast / hung.afterFirstFailure.requests
      const back = hung.resume ? 'answering what it held too' : 'new connections only'
      return [
        {
          target: 'hung identity provider: callers after the first failure (issue 32)',
          goal: `>= 95% answered within ${hung.fastMs} ms`,
          measured: `${(100 * fastShare).toFixed(1)}%`,
          pass: hung.afterFirstFailure.requests === 0 ? undefined : fastShare >= 0.95
        },
        { target: `hung identity provider back, ${back} (issue 32)`, goal: 'first 200 within 3 s', measured: ms(hung.firstOkAfterOpenMs), pass: hung.firstOkAfterOpenMs <= 3_000 }
      ]
    }),
    ...scenarios.slow.map((run) => ({
      target: `slow upstream ${ms(run.latencyMs)}: second ask (issue 32)`,
      goal: 'a call for each username only if its first one was never sent',
      measured: `${run.second.calls} new calls, ${statuses(run.second.xCache)}`,
      pass: run.second.calls <= run.callers - run.first.calls
    }))
  ]
}
