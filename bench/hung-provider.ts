import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { HOST, type ProcessGroup } from './processes.ts'
import { connectionsTo, countBy, simulatorCounts, timedGet, type Timed } from './requests.ts'
import { percentile } from './stats.ts'
import { startService, startSimulator } from './targets.ts'

// Issue 32, point 3: an identity provider that accepts connections and never answers. The service's AUTH_URL is a
// gate of the bench's own on loopback: while hung it holds every connection it accepts, silent; once opened it pipes
// new ones to the simulator's token endpoint. Two fresh instances on one Redis (a key prefix of their own), no token
// held, default settings; closed-loop callers, each asking one cold username after another, alternate instances.

export interface HungProviderSettings {
  callers: number
  hungSeconds: number
  /** After the gate opens: the callers stop at the first 200, or after this long. */
  recoverySeconds: number
  /** An answer within this counts as fast. */
  fastMs: number
  /** When the provider answers again, whether it answers the connections it held too (a hung process resuming), or only new ones. */
  resume: boolean
}

export interface HungProviderRun extends HungProviderSettings {
  /** Every answer whose request started while the provider was hung. */
  hung: { answers: number, statuses: Record<string, number>, p50Ms: number, p99Ms: number }
  /** When the first failure was answered, from the callers' start. */
  firstFailureMs: number
  /** Of the requests started after the first failure was answered (and before the gate opened): how many, how many answered within fastMs. */
  afterFirstFailure: { requests: number, fast: number }
  /** Connections the gate held unanswered while hung (the instances' auth pools open them, for exchanges or ahead of them). */
  exchangesHeld: number
  /** Connections opened after the provider was back. */
  connectionsAfterOpen: number
  /** From the gate's opening to the end of the first 200; NaN when none came. */
  firstOkAfterOpenMs: number
  tokenRequestsAfterOpen: number
}

interface Stamped extends Timed { startedAt: number, endedAt: number }

export async function hungProvider (
  { group, logLevel, redis, settings }: { group: ProcessGroup, logLevel: string, redis: { url: string, keyPrefix: string }, settings: HungProviderSettings }
): Promise<HungProviderRun> {
  const simulator = await startSimulator(group, 5, 'simulator-hung-provider')
  const gate = await startGate(simulator.port)
  const instances: Awaited<ReturnType<typeof startService>>[] = []
  try {
    for (const name of ['a', 'b']) {
      instances.push(await startService(group, { name: `service-hung-provider-${name}`, simulator, logLevel, redis, env: { AUTH_URL: gate.url } }))
    }
    const pools = instances.map((instance) => connectionsTo(instance.url, settings.callers))
    const answers: Stamped[] = []
    const t0 = performance.now()
    let openedAt = Number.POSITIVE_INFINITY
    // Set when the gate opens: a caller that looked at an end set here could stop before the recovery it is there to see.
    let stopAt = Number.POSITIVE_INFINITY
    const caller = async (index: number): Promise<void> => {
      for (let n = 0; performance.now() < stopAt; n++) {
        const startedAt = performance.now() - t0
        const answer = await timedGet(pools[(index + n) % pools.length] as ReturnType<typeof connectionsTo>, `/profile/hung-${index}-${n}`)
        const stamped = { ...answer, startedAt, endedAt: performance.now() - t0 }
        answers.push(stamped)
        if (answer.status === 200 && stamped.startedAt >= openedAt - t0) stopAt = Math.min(stopAt, performance.now())
      }
    }
    const callers = Array.from({ length: settings.callers }, async (_, index) => { await caller(index) })
    await new Promise((resolve) => setTimeout(resolve, 1000 * settings.hungSeconds))
    const tokensBeforeOpen = (await simulatorCounts(simulator.url)).tokenRequests
    openedAt = performance.now()
    gate.open(settings.resume)
    stopAt = openedAt + 1000 * settings.recoverySeconds
    await Promise.all(callers)
    await Promise.all(pools.map(async (pool) => { await pool.close() }))
    const opened = openedAt - t0
    const hung = answers.filter((answer) => answer.startedAt < opened)
    const firstFailureMs = Math.min(...hung.filter((answer) => answer.status !== 200).map((answer) => answer.endedAt))
    const after = hung.filter((answer) => answer.startedAt >= firstFailureMs)
    const firstOk = answers.filter((answer) => answer.status === 200 && answer.startedAt >= opened).map((answer) => answer.endedAt).sort((a, b) => a - b)[0]
    return {
      ...settings,
      hung: {
        answers: hung.length,
        statuses: countBy(hung, (answer) => String(answer.status)),
        p50Ms: percentile(hung.map((answer) => answer.ms), 50),
        p99Ms: percentile(hung.map((answer) => answer.ms), 99)
      },
      firstFailureMs,
      afterFirstFailure: { requests: after.length, fast: after.filter((answer) => answer.ms <= settings.fastMs).length },
      exchangesHeld: gate.held,
      connectionsAfterOpen: gate.passed,
      firstOkAfterOpenMs: firstOk === undefined ? Number.NaN : firstOk - opened,
      tokenRequestsAfterOpen: (await simulatorCounts(simulator.url)).tokenRequests - tokensBeforeOpen
    }
  } finally {
    await Promise.all(instances.map(async (instance) => { await instance.stop() }))
    await gate.close()
    await simulator.stop()
  }
}

/**
 * A TCP gate on loopback: holds what it accepts (unread) until opened, then pipes each new connection to `targetPort`;
 * with `resume`, the connections it holds too (what they sent is read then), as a provider that was hung and resumes.
 */
async function startGate (targetPort: number): Promise<{ url: string, held: number, passed: number, open: (resume: boolean) => void, close: () => Promise<void> }> {
  const sockets = new Set<Socket>()
  const held = new Set<Socket>()
  let isOpen = false
  let heldCount = 0
  let passed = 0
  const pipe = (socket: Socket): void => {
    const upstream = createConnection({ host: HOST, port: targetPort })
    upstream.on('error', () => socket.destroy())
    socket.once('close', () => upstream.destroy())
    socket.pipe(upstream).pipe(socket)
  }
  const server: Server = createServer({ pauseOnConnect: true }, (socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    socket.once('close', () => { sockets.delete(socket); held.delete(socket) })
    if (isOpen) {
      passed++
      pipe(socket)
      return
    }
    heldCount++
    held.add(socket)
  })
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `http://${HOST}:${port}`,
    get held () { return heldCount },
    get passed () { return passed },
    open: (resume) => {
      isOpen = true
      if (resume) for (const socket of held) pipe(socket)
      held.clear()
    },
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
