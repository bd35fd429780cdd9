import { isDeadline } from '../../cancellation.ts'
import { refusal, UPSTREAM_BUDGET_EXHAUSTED, withRetryAfter } from '../../errors.ts'
import type { BudgetRate, FleetSource, Grant } from './fleet-source.ts'
import type { Priority } from '../../resources.ts'
import { noTelemetry, type BudgetTelemetry } from '../../telemetry/telemetry.ts'
import { CallerPace } from './caller-pace.ts'
import { BudgetDropped, RULES } from './priorities.ts'
import { Reserve } from './reserve.ts'
import { realTimers, type Schedule } from './schedule.ts'
import { rank, WaitingLine, type Waiter } from './waiting-line.ts'

/** After a lease that failed unexpectedly, ask again this much later rather than at once. */
const RETRY_AFTER_FAILURE_MS = 100
/** Retries are spread this share of their delay either side: instances waiting for one refill take turns in a random order. */
const RETRY_JITTER = 0.5

export interface CallBudgetOptions {
  source: Pick<FleetSource, 'lease' | 'slowDown' | 'rate'>
  now: () => number
  schedule?: Schedule
  /** In [0, 1): spreads the retries. */
  random?: () => number
  telemetry?: BudgetTelemetry
  /** Work nobody waits for waits no longer (nor its class's bound): it may hold its key's lock, which callers elsewhere wait for. */
  backgroundWaitMs?: number
  onError: (error: unknown) => void
}

/** The waiter to serve next, and whether it goes by the reserve (a refresh-ahead with callers' right of way). */
interface Next { waiter: Waiter, reserved: boolean }

/**
 * The gate every upstream call passes before it is sent. Calls in hand (leased from the fleet's bucket) go to the
 * waiters of the highest class first, first come first served within a class; one lease at a time is asked for, for
 * all the waiters at once. A waiter whose signal aborts leaves at once: a caller at its deadline with
 * UPSTREAM_BUDGET_EXHAUSTED (and Retry-After), anyone else with the signal's reason; a caller the budget is too short
 * to reach before it must be sent is refused so at once. Background and refresh-ahead work is dropped (BudgetDropped)
 * when too many of its class wait, or when it has waited too long. The one exception to the order: refresh-ahead goes
 * first, as a caller would, while its reserve (a tenth of the rate) lasts.
 */
export class CallBudget {
  readonly #source: CallBudgetOptions['source']
  readonly #now: () => number
  readonly #schedule: Schedule
  readonly #random: () => number
  readonly #telemetry: BudgetTelemetry
  readonly #onError: (error: unknown) => void
  readonly #backgroundWaitMs: number
  readonly #waiting = new WaitingLine()
  readonly #reserve: Reserve
  readonly #pace: CallerPace
  #inHand = 0
  #lapsesAt = 0
  /** Calls taken since the last lease was asked for: the next one asks for about twice as many. */
  #taken = 0
  #leasing = false
  /** The pending retry, and the highest class waiting when it was set (a higher one asks at once). */
  #retry: { cancel: () => void, for: Priority } | undefined
  /** The rate last reported, to report it when it changes. */
  #reported: Pick<BudgetRate, 'rps' | 'scope'> | undefined

  constructor (options: CallBudgetOptions) {
    this.#source = options.source
    this.#now = options.now
    this.#reserve = new Reserve(options.now())
    this.#pace = new CallerPace(options.now())
    this.#schedule = options.schedule ?? realTimers
    this.#random = options.random ?? Math.random
    this.#telemetry = options.telemetry ?? noTelemetry
    this.#onError = options.onError
    this.#backgroundWaitMs = options.backgroundWaitMs ?? Infinity
  }

  /** Resolves when the call may be sent, which must be by `sendBy` (the app's clock); see the class for how it rejects. */
  async acquire (priority: Priority, signal: AbortSignal, sendBy = Infinity): Promise<void> {
    signal.throwIfAborted()
    if (this.#waiting.from(priority) === 0 && this.#take()) return this.#let(priority)
    const rules = RULES[priority]
    const queue = this.#waiting.of(priority)
    if (queue.length >= rules.maxQueued) throw this.#dropped(priority, 'queue_full')
    const refused = this.refusesNow(priority, sendBy)
    if (refused !== undefined) throw refused
    await new Promise<void>((resolve, reject) => {
      const leave = (): void => {
        queue.splice(queue.indexOf(waiter), 1)
        cancelWait()
        signal.removeEventListener('abort', abort)
      }
      // Counted when granted, not when its caller resumes: the callers still in line are judged by that pace at once.
      const waiter: Waiter = { priority, sendBy, grant: () => { leave(); this.#let(priority); resolve() }, refuse: (error) => { leave(); reject(error) } }
      const abort = (): void => { waiter.refuse(this.#refusal(priority, signal.reason)) }
      const maxWaitMs = rules.callerFacing ? rules.maxWaitMs : Math.min(rules.maxWaitMs, this.#backgroundWaitMs)
      const cancelWait = maxWaitMs === Infinity
        ? () => {}
        : this.#schedule(maxWaitMs, () => { waiter.refuse(this.#dropped(priority, 'waited_too_long')) })
      signal.addEventListener('abort', abort, { once: true })
      queue.push(waiter)
      // A retry pending says the budget is short already.
      if (this.#retry !== undefined) this.#defer(waiter)
      this.#pump()
    })
  }

  /** A caller's refusal known before it queues (a retry pending: the budget is short; those ahead keep it past `sendBy`): now, not a 503 at its deadline. */
  refusesNow (priority: Priority, sendBy: number): Error | undefined {
    return this.refuses(priority, sendBy) ? this.#exhausted(priority) : undefined
  }

  /** Whether `refusesNow` would refuse, counting nothing. */
  refuses (priority: Priority, sendBy: number): boolean {
    return RULES[priority].callerFacing && this.#retry !== undefined && this.#unreachable(this.#waiting.from(priority) + 1, sendBy)
  }

  /** An upstream 429 (Retry-After `holdMs`): the calls in hand are given up and the rate is halved. */
  async slowDown (holdMs: number): Promise<void> {
    this.#inHand = 0
    await this.#source.slowDown(this.#now(), holdMs)
    this.#reportRate()
  }

  /** The effective rate now (for /readyz). */
  rate (): BudgetRate {
    return this.#source.rate(this.#now())
  }

  #let (priority: Priority): void {
    this.#taken++
    if (RULES[priority].callerFacing) this.#pace.record(this.#now())
    this.#telemetry.budgetCall(priority)
  }

  #take (): boolean {
    if (this.#inHand === 0 || this.#now() >= this.#lapsesAt) return false
    this.#inHand--
    return true
  }

  /** Hands the calls in hand out, highest class first, then asks for more if anyone still waits. */
  #pump (): void {
    let next = this.#next()
    while (next !== undefined && this.#take()) {
      if (next.reserved) this.#reserve.take()
      next.waiter.grant()
      next = this.#next()
    }
    if (next === undefined) return this.#cancelRetry()
    // A refresh-ahead going by its reserve leases as a caller: the fleet's last calls are the callers' and its own.
    const top = next.reserved ? 'caller' : next.waiter.priority
    if (this.#leasing) return
    if (this.#retry !== undefined) {
      if (rank(top) >= rank(this.#retry.for)) return
      this.#cancelRetry()
    }
    this.#lease(top)
  }

  #lease (top: Priority): void {
    this.#leasing = true
    const demand = 2 * this.#taken
    this.#taken = 0
    this.#source.lease(this.#waiting.from('refresh-ahead'), demand, RULES[top].reserveShare, this.#now()).then(
      (grant) => { this.#leased(grant, top) },
      (error: unknown) => {
        this.#onError(error)
        this.#leased({ granted: 0, retryInMs: RETRY_AFTER_FAILURE_MS, lapsesAt: 0 }, top)
      }
    )
  }

  #leased (grant: Grant, top: Priority): void {
    this.#leasing = false
    this.#inHand = grant.granted
    this.#lapsesAt = grant.lapsesAt
    this.#reportRate()
    if (grant.retryInMs > 0) {
      // A refresh-ahead waiting for its reserve to refill asks again when it has, if that comes first.
      const retryInMs = this.#waiting.of('refresh-ahead').length === 0 ? grant.retryInMs : Math.min(grant.retryInMs, this.#reserve.nextInMs(this.rate().shareRps))
      const cancel = this.#schedule(Math.ceil(retryInMs * (1 + RETRY_JITTER * (2 * this.#random() - 1))), () => {
        this.#retry = undefined
        this.#pump()
      })
      this.#retry = { cancel, for: top }
    }
    this.#pump()
    if (grant.retryInMs > 0) {
      this.#refuseUnreachable()
      for (const waiter of this.#waiting.all()) this.#defer(waiter)
    }
  }

  /** The budget turned out short: queued callers it cannot reach before they must be sent are told now, each by its place. */
  #refuseUnreachable (): void {
    const late = this.#waiting.callersPast((place, sendBy) => this.#unreachable(place, sendBy))
    for (const waiter of late) waiter.refuse(this.#exhausted(waiter.priority))
  }

  #defer (waiter: Waiter): void {
    if (waiter.deferred === true) return
    waiter.deferred = true
    this.#telemetry.budgetDeferred(waiter.priority)
  }

  #cancelRetry (): void {
    this.#retry?.cancel()
    this.#retry = undefined
  }

  #refusal (priority: Priority, reason: unknown): unknown {
    return RULES[priority].callerFacing && isDeadline(reason) ? this.#exhausted(priority) : reason
  }

  /** A caller's refusal for want of budget: come back once the callers now queued have been served. */
  #exhausted (priority: Priority): Error {
    this.#telemetry.budgetDropped(priority, 'deadline')
    const seconds = this.#expectedWaitMs(priority) / 1000
    return withRetryAfter(refusal('budget', () => new UPSTREAM_BUDGET_EXHAUSTED(Math.max(1, Math.ceil(seconds)))), seconds)
  }

  /** Whether the caller at `place` in the line (1: the next) can expect to be sent only after `sendBy`. */
  #unreachable (place: number, sendBy: number): boolean {
    return this.#now() + this.#pace.waitAtMs(place, this.rate().shareRps, this.#now()) > sendBy
  }

  /** How long one more call of `priority` can expect to wait: the waiters of its class and above, and itself. */
  #expectedWaitMs (priority: Priority): number {
    return this.#pace.waitAtMs(this.#waiting.from(priority) + 1, this.rate().shareRps, this.#now())
  }

  #dropped (priority: Priority, reason: BudgetDropped['reason']): BudgetDropped {
    this.#telemetry.budgetDropped(priority, reason)
    return new BudgetDropped(priority, reason)
  }

  #reportRate (): void {
    const { rps, scope } = this.rate()
    if (rps === this.#reported?.rps && scope === this.#reported.scope) return
    this.#reported = { rps, scope }
    this.#telemetry.budgetRate(rps, scope)
  }

  /** The first refresh-ahead while its reserve has a call, else the first waiter of the highest class waiting. */
  #next (): Next | undefined {
    const refresh = this.#waiting.of('refresh-ahead')[0]
    if (refresh !== undefined && this.#reserve.available(this.rate().shareRps, this.#now())) return { waiter: refresh, reserved: true }
    const first = this.#waiting.first()
    return first === undefined ? undefined : { waiter: first, reserved: false }
  }
}
