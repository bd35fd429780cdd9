import { PRIORITIES, type Priority } from '../../resources.ts'
import { RULES } from './priorities.ts'

/** The classes a caller waits on, in the order they are served. */
const CALLER_FACING = PRIORITIES.filter((priority) => RULES[priority].callerFacing)

/** A call waiting for budget. */
export interface Waiter {
  priority: Priority
  /** When it must be sent at the latest (the app's clock). */
  sendBy: number
  grant: () => void
  /** It leaves the line with `error`. */
  refuse: (error: unknown) => void
  /** Reported as deferred: it found the budget short, not merely a lease on its way. */
  deferred?: true
}

/** The calls waiting for budget: a queue per class, first come first served within each. */
export class WaitingLine {
  readonly #queues = new Map<Priority, Waiter[]>(PRIORITIES.map((priority) => [priority, []]))

  of (priority: Priority): Waiter[] {
    return this.#queues.get(priority) ?? []
  }

  /** The first waiter of the highest class waiting. */
  first (): Waiter | undefined {
    for (const queue of this.#queues.values()) if (queue[0] !== undefined) return queue[0]
    return undefined
  }

  /** How many wait of `priority` and every class above it. */
  from (priority: Priority): number {
    let count = 0
    for (const each of PRIORITIES.slice(0, rank(priority) + 1)) count += this.of(each).length
    return count
  }

  /**
   * The callers (the caller-facing classes' waiters), in the order they will be served, whose place `late` says is
   * reached only after they must be sent; each one found is counted out of the places of those behind it.
   */
  callersPast (late: (place: number, sendBy: number) => boolean): Waiter[] {
    const found: Waiter[] = []
    let place = 0
    for (const priority of CALLER_FACING) {
      for (const waiter of this.of(priority)) {
        if (late(place + 1, waiter.sendBy)) found.push(waiter)
        else place++
      }
    }
    return found
  }

  * all (): Generator<Waiter> {
    for (const queue of this.#queues.values()) yield * queue
  }
}

/** A class's place in the order, 0 the highest. */
export function rank (priority: Priority): number {
  return PRIORITIES.indexOf(priority)
}
