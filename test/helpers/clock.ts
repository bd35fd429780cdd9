import { setTimeout as sleep } from 'node:timers/promises'

/** The slice of a tap test the helpers need (so they work with any tap version's typings). */
export interface TestContext {
  teardown: (fn: () => unknown) => void
}

/** The clock a test moves, in ms: the app's `now`, so that entries, tokens and windows age without anyone sleeping. */
export class Clock {
  #now: number
  constructor (start = Date.now()) {
    this.#now = start
  }

  readonly now = (): number => this.#now
  advance (ms: number): void {
    this.#now += ms
  }
}

/** A host's clock: it runs, and is `shift` off (the test moves it further to age entries); instances whose clocks disagree keep Redis's clock in step with theirs. */
export class HostClock {
  #shiftMs: number
  constructor (shiftMs = 0) {
    this.#shiftMs = shiftMs
  }

  readonly now = (): number => Date.now() + this.#shiftMs
  advance (ms: number): void {
    this.#shiftMs += ms
  }
}

/** Waits, within a bound, for something a real socket or process does in the background; throws when it does not. */
export async function eventually (check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await sleep(10)
  }
}

/** Lets pending promise callbacks (a background renewal) run. */
export async function settle (): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve))
}
