import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import type { TestContext } from './clock.ts'

/** An upstream in front of another that holds the calls it receives while the test says so. */
export interface Gate {
  /** The app's UPSTREAM_BASE_URL (and the simulator's audience), or its AUTH_URL. */
  url: string
  /** Where calls go on to: the simulator's base URL (or its token endpoint's origin). */
  target: string
  /** Calls held now. */
  held: () => number
  /** Calls whose caller hung up before the gate had answered them (aborted at the upstream, as the simulator counts them). */
  aborted: () => number
  /** From now on, calls wait for `release`. */
  hold: () => void
  release: () => void
}

/** Headers that describe one hop, not the message. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host'])

function endToEnd (headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(headers).filter((entry): entry is [string, string | string[]] =>
    entry[1] !== undefined && !HOP_BY_HOP.has(entry[0])))
}

/**
 * A gate the test opens: a load is held at the upstream until the test has seen every caller it should serve arrive,
 * rather than for a latency a busy machine may outlast.
 */
export async function gate (t: TestContext): Promise<Gate> {
  let opened = Promise.resolve()
  let release = (): void => {}
  let held = 0
  let aborted = 0
  const server = createServer((req, res) => {
    held++
    res.on('close', () => { if (!res.writableFinished) aborted++ })
    const body = Array.fromAsync(req).then((chunks) => Buffer.concat(chunks))
    opened.then(async () => {
      held--
      const method = req.method ?? 'GET'
      const answer = await request(`${state.target}${req.url ?? ''}`, { method, headers: endToEnd(req.headers), ...(method !== 'GET' && { body: await body }) })
      res.writeHead(answer.statusCode, endToEnd(answer.headers))
      res.end(Buffer.from(await answer.body.arrayBuffer()))
    }).catch(() => { res.destroy() })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    release()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  const state: Gate = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    target: '',
    held: () => held,
    aborted: () => aborted,
    hold: () => { opened = new Promise((resolve) => { release = resolve }) },
    release: () => { release() }
  }
  return state
}
