import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type OpenMetricsContentType, type PrometheusContentType } from 'prom-client'
import type { RefusalReason } from '../errors.ts'
import type { CacheState, Priority, Resource } from '../resources.ts'
import { budgetMetrics } from './budget-metrics.ts'
import { busMetrics } from './bus-metrics.ts'
import { edgeMetrics, type EdgeMetrics } from './edge-metrics.ts'
import { refusalMetrics } from './refusal-metrics.ts'
import { storeMetrics } from './store-metrics.ts'
import type { BreakerState, BudgetScope, BudgetTelemetry, BusTelemetry, DropReason, StoreTelemetry, Telemetry, UpstreamOutcome } from './telemetry.ts'

/** What one answered request looked like, as the request metrics label it. */
export interface RequestObservation {
  method: string
  /** The route's pattern (`/profile/:username`), never the raw URL: one series per route, not per username. */
  route: string
  status: number
  seconds: number
}

const PREFIX = 'pbff_'

/** A hit is well under a millisecond, an upstream call tens of them, a timeout seconds. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const UPSTREAM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** The labels naming the trace of a latency sample (an OpenMetrics exemplar): `trace_id`, `span_id`. */
export type ExemplarLabels = Record<string, string>

export interface PrometheusTelemetryOptions {
  /** The trace of the sample being observed, if it has a sampled one; given: exemplars, in the OpenMetrics format. */
  exemplar?: () => ExemplarLabels | undefined
}

type ContentType = PrometheusContentType | OpenMetricsContentType
type AnyRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>

function registryOf (contentType: ContentType): AnyRegistry {
  if (contentType === Registry.PROMETHEUS_CONTENT_TYPE) return new Registry()
  const registry = new Registry<OpenMetricsContentType>()
  registry.setContentType(contentType)
  return registry
}

/**
 * Node's process metrics describe the process, not an app: collected once (per exposition format), into a
 * registry of their own, and rendered after each app's metrics. (Several apps in one process, as in the tests,
 * would otherwise each start an event-loop monitor and a GC observer that nothing can stop.)
 */
const processRegistries = new Map<ContentType, AnyRegistry>()
function processMetrics (contentType: ContentType): AnyRegistry {
  let registry = processRegistries.get(contentType)
  if (registry === undefined) {
    registry = registryOf(contentType)
    collectDefaultMetrics({ register: registry })
    processRegistries.set(contentType, registry)
  }
  return registry
}

/**
 * The Telemetry seam implemented with prom-client, plus the request metrics the app's hooks report.
 * Every instance has its own registry, so apps built side by side never share a counter.
 */
export class PrometheusTelemetry implements Telemetry {
  readonly contentType: ContentType
  readonly #registry: AnyRegistry
  readonly #exemplar: PrometheusTelemetryOptions['exemplar']
  readonly #requests: Counter<'method' | 'route' | 'status'>
  readonly #requestSeconds: Histogram<'method' | 'route'>
  readonly #cacheLookups: Counter<'resource' | 'state'>
  readonly #upstreamCalls: Counter<'resource' | 'outcome'>
  readonly #upstreamSeconds: Histogram<'resource'>
  readonly #tokenExchanges: Counter<'outcome'>
  readonly #coalesced: Counter<'resource'>
  readonly refusal: (reason: RefusalReason) => void
  readonly backoff: (active: boolean) => void
  readonly breaker: (state: BreakerState) => void
  /** The upstream concurrency limiter, read when the metrics are rendered. */
  readonly upstreamLimiter: EdgeMetrics['upstreamLimiter']
  readonly upstreamBreaker: EdgeMetrics['upstreamBreaker']
  readonly #redisUp: Gauge
  readonly #budget: BudgetTelemetry
  readonly budgetInstances = (count: number): void => { this.#budget.budgetInstances(count) }
  readonly bus: BusTelemetry
  readonly store: StoreTelemetry
  // Undefined until Redis reports (never without REDIS_URL).
  #redisState: boolean | undefined

  constructor ({ exemplar }: PrometheusTelemetryOptions = {}) {
    // Exemplars exist only in the OpenMetrics format (Prometheus asks for it first).
    this.#registry = registryOf(exemplar === undefined ? Registry.PROMETHEUS_CONTENT_TYPE : Registry.OPENMETRICS_CONTENT_TYPE)
    this.#exemplar = exemplar
    // prom-client's types bind a registry to one format; the metrics themselves take either.
    this.#budget = budgetMetrics(this.#registry as Registry)
    this.bus = busMetrics(this.#registry as Registry)
    this.store = storeMetrics(this.#registry as Registry)
    this.refusal = refusalMetrics(this.#registry as Registry)
    const edge = edgeMetrics(this.#registry as Registry)
    this.backoff = edge.backoff
    this.breaker = edge.breaker
    this.upstreamLimiter = edge.upstreamLimiter
    this.upstreamBreaker = edge.upstreamBreaker
    const registers = [this.#registry]
    const enableExemplars = exemplar !== undefined
    this.contentType = this.#registry.contentType
    this.#requests = new Counter({
      name: `${PREFIX}http_requests_total`,
      help: 'Requests answered, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers
    })
    this.#requestSeconds = new Histogram({
      name: `${PREFIX}http_request_duration_seconds`,
      help: 'Time to answer a request, by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: REQUEST_BUCKETS,
      registers,
      enableExemplars
    })
    this.#cacheLookups = new Counter({
      name: `${PREFIX}cache_lookups_total`,
      help: 'Cache lookups by resource and result (HIT, MISS, STALE, BYPASS), as the cache reports them (a field query is a profile lookup, a batch one per username)',
      labelNames: ['resource', 'state'],
      registers
    })
    this.#upstreamCalls = new Counter({
      name: `${PREFIX}upstream_calls_total`,
      help: 'Calls to the upstream by resource and outcome',
      labelNames: ['resource', 'outcome'],
      registers
    })
    this.#upstreamSeconds = new Histogram({
      name: `${PREFIX}upstream_call_duration_seconds`,
      help: 'Time the upstream took to answer, by resource',
      labelNames: ['resource'],
      buckets: UPSTREAM_BUCKETS,
      registers,
      enableExemplars
    })
    this.#tokenExchanges = new Counter({
      name: `${PREFIX}token_exchanges_total`,
      help: 'Client-credentials exchanges by outcome; "minted" counts tokens issued to us (watch it against the quota)',
      labelNames: ['outcome'],
      registers
    })
    this.#coalesced = new Counter({
      name: `${PREFIX}coalesced_waiters_total`,
      help: 'Callers that waited for a load another caller or instance had already started, by resource',
      labelNames: ['resource'],
      registers
    })
    this.#redisUp = new Gauge({
      name: `${PREFIX}redis_up`,
      help: '1 while Redis answers, 0 while it is down or hung (the in-process cache serves then); no sample without REDIS_URL',
      registers,
      collect: () => {
        // An unlabelled gauge would otherwise report 0 for a service that has no Redis at all.
        if (this.#redisState === undefined) this.#redisUp.remove()
        else this.#redisUp.set(this.#redisState ? 1 : 0)
      }
    })
    // Series an operator alerts on exist from the start, at zero, rather than appearing with the first event.
    for (const outcome of ['minted', 'failed']) this.#tokenExchanges.labels(outcome).inc(0)
  }

  tokenExchange (outcome: 'minted' | 'failed'): void {
    this.#tokenExchanges.labels(outcome).inc()
  }

  upstreamCall (resource: Resource, outcome: UpstreamOutcome, seconds: number): void {
    this.#upstreamCalls.labels(resource, outcome).inc()
    // A call never made (breaker open) took no upstream time worth a latency sample; a cancelled one measured its callers' patience.
    if (outcome === 'short_circuited' || outcome === 'cancelled') return
    if (this.#exemplar === undefined) this.#upstreamSeconds.observe({ resource }, seconds)
    else this.#observeWithExemplar(this.#upstreamSeconds, { resource }, seconds, this.#exemplar)
  }

  cacheResult (resource: Resource, state: CacheState): void {
    this.#cacheLookups.inc({ resource, state })
  }

  coalescedWaiter (resource: Resource): void {
    this.#coalesced.inc({ resource })
  }

  /** Redis's health, as the Redis layer reports it (never called without REDIS_URL: no sample then). */
  redis (up: boolean): void {
    this.#redisState = up
  }

  budgetCall (priority: Priority): void {
    this.#budget.budgetCall(priority)
  }

  budgetDeferred (priority: Priority): void {
    this.#budget.budgetDeferred(priority)
  }

  budgetDropped (priority: Priority, reason: DropReason | 'deadline'): void {
    this.#budget.budgetDropped(priority, reason)
  }

  budgetRate (rps: number, scope: BudgetScope): void {
    this.#budget.budgetRate(rps, scope)
  }

  observeRequest ({ method, route, status, seconds }: RequestObservation): void {
    this.#requests.inc({ method, route, status })
    // Off, a hit's observation is what it always was.
    if (this.#exemplar === undefined) this.#requestSeconds.observe({ method, route }, seconds)
    else this.#observeWithExemplar(this.#requestSeconds, { method, route }, seconds, this.#exemplar)
  }

  /** The exposition (Prometheus text, or OpenMetrics with exemplars): this app's metrics, then the process's. */
  async render (): Promise<string> {
    const process = processMetrics(this.contentType)
    if (this.#exemplar === undefined) return await this.#registry.metrics() + await process.metrics()
    // One document: OpenMetrics ends with `# EOF`, which two renderings put together would have twice.
    return await Registry.merge([this.#registry, process] as Registry[]).metrics()
  }

  /** An exemplar-enabled histogram takes only the object form; empty exemplar labels record none. */
  #observeWithExemplar<T extends string> (
    histogram: Histogram<T>, labels: Partial<Record<T, string>>, seconds: number, exemplar: () => ExemplarLabels | undefined
  ): void {
    histogram.observe({ labels, value: seconds, exemplarLabels: (exemplar() ?? {}) as Partial<Record<T, string>> })
  }
}
