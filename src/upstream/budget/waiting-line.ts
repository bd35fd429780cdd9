import { PRIORITIES, type Priority } from '../../resources.ts'

/** A call waiting for budget. */
export interface Waiter {
  priority: Priority
  grant: () => void
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

  * all (): Generator<Waiter> {
    for (const queue of this.#queues.values()) yield * queue
  }
}

/** A class's place in the order, 0 the highest. */
export function rank (priority: Priority): number {
  return PRIORITIES.indexOf(priority)
}
