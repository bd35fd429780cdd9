import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { parser } from '@prometheus-io/lezer-promql'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { eventually, parseMetrics, REDIS_URL, stack } from '../../helper.ts'
import { skipWithout } from '../../helpers/required-tool.ts'

const root = new URL('../../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')

interface Panel { id: number, title: string, type: string, datasource: { uid: string }, targets: Array<{ expr: string, datasource: { uid: string } }> }
/** A row only groups the panels below it: no query, no data source. */
interface Row { id: number, title: string, type: 'row' }
interface Rule { alert: string, expr: string, for: string, labels: { severity: string }, annotations: Record<string, string> }

const dashboard = JSON.parse(read('deploy/grafana/dashboards/profile-bff.json')) as { uid: string, panels: Array<Panel | Row>, templating: { list: Array<{ name: string, type: string, query: string }> } }
const panels = dashboard.panels.filter((panel): panel is Panel => panel.type !== 'row')
const rules = (parse(read('deploy/prometheus/rules/profile-bff.yml')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap((group) => group.rules)

/** How panels name the dashboard's data source variable (Grafana's syntax, not a template string). */
const DATASOURCE_VARIABLE = '$' + '{datasource}'

/** Series Prometheus itself adds to every target; labels it adds to every series. */
const SCRAPE_SERIES = new Set(['up'])
const TARGET_LABELS = new Set(['job', 'instance'])

interface Selector { metric: string, labels: string[] }

/** The selectors of a PromQL expression (Grafana's `$__rate_interval` read as 5m); throws on a syntax error. */
function selectors (expr: string): Selector[] {
  const query = expr.replaceAll('$__rate_interval', '5m')
  const found: Selector[] = []
  parser.parse(query).iterate({
    enter (node) {
      if (node.type.isError) throw new Error(`PromQL syntax error at ${node.from} in ${query}`)
      if (node.name !== 'VectorSelector') return
      const metric = node.node.getChild('Identifier')
      const matchers = node.node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []
      found.push({
        metric: metric === null ? '' : query.slice(metric.from, metric.to),
        labels: matchers.map((matcher) => { const name = matcher.getChild('LabelName'); return name === null ? '' : query.slice(name.from, name.to) })
      })
    }
  })
  return found
}

/** The series the service exports, with the label names seen on them, after some traffic (Redis and an upstream budget configured). */
async function exported (t: Test): Promise<Map<string, Set<string>>> {
  const { app } = await stack(t, { env: { REDIS_URL, UPSTREAM_MAX_RPS: '1000' } })
  await eventually(async () => (await app.inject('/readyz')).json().redis === 'up', '/readyz says redis is up')
  for (const url of ['/profile/alice', '/profile/alice', '/profile/ghost-1', '/nowhere']) await app.inject(url)
  const text = (await app.inject('/metrics')).body
  const series = new Map<string, Set<string>>()
  for (const [, name = '', type] of text.matchAll(/^# TYPE (\w+) (\w+)$/gm)) {
    const names = type === 'histogram' ? ['_bucket', '_sum', '_count'].map((suffix) => name + suffix) : type === 'summary' ? [name, `${name}_sum`, `${name}_count`] : [name]
    for (const each of names) series.set(each, new Set())
  }
  for (const sample of parseMetrics(text)) for (const label of Object.keys(sample.labels)) series.get(sample.name)?.add(label)
  return series
}

/** What is wrong with one expression's selectors: metrics not exported, labels not on them. */
function unknown (expr: string, series: Map<string, Set<string>>): string[] {
  const problems: string[] = []
  for (const { metric, labels } of selectors(expr)) {
    if (SCRAPE_SERIES.has(metric)) continue
    const known = series.get(metric)
    if (known === undefined) { problems.push(`${metric} is not exported`); continue }
    for (const label of labels) if (known.size > 0 && !known.has(label) && !TARGET_LABELS.has(label)) problems.push(`${metric} has no label ${label}`)
  }
  return problems
}

t.test('every metric and label the dashboard and the alerts name is one the service exports', async (t) => {
  const series = await exported(t)
  t.ok(series.has('pbff_redis_up') && series.has('pbff_http_request_duration_seconds_bucket'))
  t.same(series.get('pbff_upstream_budget_rps'), new Set(['scope']), 'the effective budget has a sample: its label is checked too')
  t.same(unknown('rate(pbff_http_requests_totl[5m]) + pbff_upstream_breaker_state{breaker="open"}', series),
    ['pbff_http_requests_totl is not exported', 'pbff_upstream_breaker_state has no label breaker'], 'the check catches a typo')
  t.throws(() => selectors('sum(rate(pbff_http_requests_total[5m])'), /syntax error/, 'and a syntax error')
  const expressions = [
    ...panels.flatMap((panel) => panel.targets.map((target) => ({ where: `panel "${panel.title}"`, expr: target.expr }))),
    ...rules.map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr }))
  ]
  for (const { where, expr } of expressions) t.same(unknown(expr, series), [], where)
  const named = new Set(expressions.flatMap(({ expr }) => selectors(expr).map((selector) => selector.metric)))
  for (const needed of ['pbff_cache_lookups_total', 'pbff_upstream_calls_total', 'pbff_token_exchanges_total', 'pbff_upstream_breaker_state',
    'pbff_upstream_backoff_active', 'pbff_redis_up', 'pbff_http_request_duration_seconds_bucket', 'pbff_http_requests_total',
    'pbff_upstream_budget_calls_total', 'pbff_upstream_budget_deferred_total', 'pbff_upstream_budget_dropped_total', 'pbff_upstream_budget_rps']) t.ok(named.has(needed), `${needed} is watched`)
})

t.test('the dashboard: one panel for each thing an operator watches, all on the dashboard\'s data source', async (t) => {
  t.equal(dashboard.uid, 'profile-bff')
  t.same(dashboard.templating.list.map(({ name, type, query }) => ({ name, type, query })), [{ name: 'datasource', type: 'datasource', query: 'prometheus' }])
  const titles = dashboard.panels.map((panel) => panel.title)
  for (const title of ['Answers by cache state', 'Upstream calls per 1,000 lookups', 'Tokens minted (24 h)', 'Breaker and back-off',
    'Redis health', 'Request latency p50 / p99', '429s and 5xx', 'Upstream budget', 'Budget calls by priority', 'Effective budget vs calls sent',
    'Budget deferred by priority', 'Budget dropped by priority and reason']) t.ok(titles.includes(title), title)
  t.equal(new Set(dashboard.panels.map((panel) => panel.id)).size, dashboard.panels.length, 'panel ids are unique')
  for (const panel of panels) {
    t.ok(panel.targets.length > 0, `${panel.title} queries something`)
    for (const ds of [panel.datasource, ...panel.targets.map((target) => target.datasource)]) t.equal(ds.uid, DATASOURCE_VARIABLE, panel.title)
  }
  const latency = panels.find((panel) => panel.title === 'Request latency p50 / p99')?.targets.map((target) => target.expr) ?? []
  t.match(latency, [/^histogram_quantile\(0\.5,/, /^histogram_quantile\(0\.99,/])
})

t.test('the alerts: each named, lasting, with a severity, a summary and a runbook line', async (t) => {
  t.same(rules.map((rule) => rule.alert).sort(), ['ProfileBffBreakerOpen', 'ProfileBffErrorRate', 'ProfileBffInstanceDown', 'ProfileBffRedisDown',
    'ProfileBffShelterDegraded', 'ProfileBffTokenExchangesFailing', 'ProfileBffUpstreamBudgetExhausted', 'ProfileBffUpstreamFailing'])
  for (const rule of rules) {
    t.match(rule.for, /^\d+m$/, `${rule.alert}: not on one bad scrape`)
    t.match(rule.labels.severity, /^(page|ticket)$/, rule.alert)
    t.same(Object.keys(rule.annotations).sort(), ['runbook', 'summary'], rule.alert)
    t.notMatch(rule.annotations.runbook, /\n/, `${rule.alert}: one line`)
  }
})

const promtool = spawnSync('promtool', ['--version']).status === 0
t.test('promtool accepts the rules, their unit tests pass, and the compose Prometheus configuration is valid', {
  skip: skipWithout(promtool, 'promtool (Debian package prometheus) is not installed here')
}, async (t) => {
  const run = (...args: string[]) => spawnSync('promtool', args, { cwd: root, encoding: 'utf8' })
  for (const result of [
    run('check', 'rules', 'deploy/prometheus/rules/profile-bff.yml'),
    run('test', 'rules', 'deploy/prometheus/tests/profile-bff.test.yml'),
    run('check', 'config', '--syntax-only', 'deploy/prometheus/prometheus.yml')
  ]) t.equal(result.status, 0, result.stdout + result.stderr)
})
