/**
 * Issue 24, item 1: sends the malformed corpus (bench/malformed-corpus.ts, 2,000 raw requests by default)
 * to the service started in-process in front of the upstream simulator, one connection per request over
 * node:net, and classifies every answer as on or off the contract (/work/shared/CONTRACT.md, Errors).
 * Exits 1 when any answer is off the contract.
 *
 *   npx node bench/malformed.ts    MALFORMED_COUNT (2000), MALFORMED_CONCURRENCY (20), MALFORMED_TIMEOUT_MS (3000)
 *   MALFORMED_JSON=<file>          also writes one line per exchange: template, statuses, closed, error, ms
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { buildApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { serviceEnv } from '../dev/service-env.ts'
import { startSimulator } from '../dev/simulator.ts'
import { corpus, type CorpusRequest } from './malformed-corpus.ts'

const COUNT = Number(process.env.MALFORMED_COUNT ?? 2_000)
const CONCURRENCY = Number(process.env.MALFORMED_CONCURRENCY ?? 20)
const TIMEOUT_MS = Number(process.env.MALFORMED_TIMEOUT_MS ?? 3_000)
/** After a complete final answer that keeps the connection open: how long to watch for more bytes or a close. */
const GRACE_MS = 300
const REQUIRED_HEADERS = ['x-request-id', 'access-control-allow-origin', 'content-security-policy', 'x-content-type-options']
const BODY_KEYS = 'code,error,message,statusCode'

/** Every code of the error table of docs/reference.md (`| situation | 4xx | `CODE` ... |`). */
const REFERENCE_CODES = new Set([...readFileSync(new URL('../docs/reference.md', import.meta.url), 'utf8')
  .matchAll(/^\|.*\|\s*[45]\d\d\s*\|\s*`([A-Z_]+)`/gm)].map((match) => match[1]))

interface Answer { status: number, headers: Map<string, string>, body: string, raw: string }
interface Exchange { request: CorpusRequest, answers: Answer[], trailing: string, raw: string, closedByServer: boolean, error?: string, ms: number }

/** The answers in `bytes` (latin1): complete ones, then what is left (an incomplete answer, or nothing). */
function parseAnswers (bytes: string, head: boolean, closed: boolean): { answers: Answer[], rest: string } {
  const answers: Answer[] = []
  let rest = bytes
  for (;;) {
    const end = rest.indexOf('\r\n\r\n')
    const line = /^HTTP\/1\.[01] (\d{3})(?: [^\r\n]*)?\r\n/.exec(rest)
    if (end < 0 || line === null) return { answers, rest }
    const status = Number(line[1])
    const headers = new Map<string, string>()
    for (const field of rest.slice(line[0].length, end).split('\r\n').filter(Boolean)) {
      const colon = field.indexOf(':')
      const key = field.slice(0, colon).toLowerCase()
      const value = field.slice(colon + 1).trim()
      headers.set(key, headers.has(key) ? `${headers.get(key) ?? ''}, ${value}` : value)
    }
    let at = end + 4
    let body = ''
    if (!(status < 200 || status === 204 || status === 304 || head)) {
      if (/chunked/i.test(headers.get('transfer-encoding') ?? '')) {
        for (;;) {
          const eol = rest.indexOf('\r\n', at)
          if (eol < 0) return { answers, rest }
          const size = parseInt(rest.slice(at, eol), 16)
          if (Number.isNaN(size) || rest.length < eol + 2 + size + 2) return { answers, rest }
          body += rest.slice(eol + 2, eol + 2 + size)
          at = eol + 2 + size + 2
          if (size === 0) break
        }
      } else if (headers.has('content-length')) {
        const length = Number(headers.get('content-length'))
        if (rest.length < at + length) return { answers, rest }
        body = rest.slice(at, at + length)
        at += length
      } else {
        if (!closed) return { answers, rest }
        body = rest.slice(at)
        at = rest.length
      }
    }
    answers.push({ status, headers, body, raw: rest.slice(0, at) })
    rest = rest.slice(at)
  }
}

/** One request on its own connection: what came back before the server closed, or TIMEOUT_MS, or GRACE_MS after a final answer. */
async function exchange (port: number, request: CorpusRequest): Promise<Exchange> {
  const started = Date.now()
  const head = request.raw.startsWith('HEAD ')
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  let closedByServer = false
  let error: string | undefined
  return await new Promise((resolve) => {
    let grace: NodeJS.Timeout | undefined
    let done = false
    const finish = (): void => {
      if (done) return
      done = true
      clearTimeout(timeout)
      clearTimeout(grace)
      socket.destroy()
      const raw = Buffer.concat(chunks).toString('latin1')
      const { answers, rest } = parseAnswers(raw, head, closedByServer)
      resolve({ request, answers, trailing: rest, raw, closedByServer, ...(error !== undefined && { error }), ms: Date.now() - started })
    }
    const timeout = setTimeout(finish, TIMEOUT_MS)
    socket.on('connect', () => socket.write(Buffer.from(request.raw, 'latin1')))
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      const { answers } = parseAnswers(Buffer.concat(chunks).toString('latin1'), head, false)
      const last = answers.at(-1)
      if (last !== undefined && last.status >= 200 && !/close/i.test(last.headers.get('connection') ?? '')) {
        clearTimeout(grace)
        grace = setTimeout(finish, GRACE_MS)
      }
    })
    socket.on('error', (failure: NodeJS.ErrnoException) => { error ??= failure.code ?? failure.message })
    socket.on('end', () => { closedByServer = true; finish() })
    socket.on('close', () => { closedByServer = true; finish() })
  })
}

/** Why an exchange is off the contract (nothing: on it). */
function offContract ({ answers, trailing, closedByServer, error, request }: Exchange): string[] {
  const why: string[] = []
  const finals = answers.filter((answer) => answer.status >= 200)
  if (answers.length === 0) why.push(`no answer (${error ?? (closedByServer ? 'closed' : 'timed out')})`)
  else if (finals.length === 0) why.push('a 1xx answer and no final one')
  if (answers.length > 0 && finals.length < request.requests) why.push(`${finals.length} final answer(s) to ${request.requests} pipelined requests`)
  if (trailing.length > 0) why.push(`bytes that are not a whole answer (${error ?? (closedByServer ? 'closed' : 'timed out')})`)
  for (const answer of answers.filter((each) => each.status >= 400)) {
    for (const header of REQUIRED_HEADERS) if (!answer.headers.has(header)) why.push(`${answer.status} without ${header}`)
    if (request.raw.startsWith('HEAD ')) continue
    let body: Record<string, unknown> | undefined
    try { body = JSON.parse(answer.body) } catch { why.push(`${answer.status} whose body is not JSON`) }
    if (body === undefined) continue
    if (Object.keys(body).sort().join(',') !== BODY_KEYS) why.push(`${answer.status} with keys ${Object.keys(body).join(',')}`)
    if (body.statusCode !== answer.status) why.push(`${answer.status} with statusCode ${String(body.statusCode)}`)
    if (typeof body.code !== 'string' || !REFERENCE_CODES.has(body.code)) why.push(`${answer.status} with code ${String(body.code)}, not in docs/reference.md`)
    if (typeof body.error !== 'string' || typeof body.message !== 'string') why.push(`${answer.status} whose error or message is not a string`)
  }
  const last = finals.at(-1)
  if (last !== undefined && last.status >= 400 && closedByServer && !/close/i.test(last.headers.get('connection') ?? '')) {
    why.push(`${last.status} then the connection closed, without Connection: close`)
  }
  return why
}

/** Printable: control octets and non-ASCII escaped, long runs shortened. */
function show (text: string, max = 600): string {
  const escaped = text.replace(/(.)\1{40,}/gs, (run, c: string) => `${c.repeat(8)}...(${run.length} x)`)
    .replace(/[^\x20-\x7e\n]/g, (c) => c === '\r' ? '\\r' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
  return escaped.length > max ? `${escaped.slice(0, max)}... (${text.length} octets)` : escaped
}

async function main (): Promise<void> {
  const sim = await startSimulator()
  const config = loadConfig({
    ...serviceEnv(sim),
    LOG_LEVEL: 'silent',
    ADMIN_TOKEN: 'malformed-bench-admin-token',
    // Every request from 127.0.0.1: with the limit on, most answers past the 600th would be 429.
    RATE_LIMIT_PER_MINUTE: process.env.RATE_LIMIT_PER_MINUTE ?? '0'
  })
  const app = await buildApp({ config, slowClients: { headersMs: 1000, requestMs: 2000, checkIntervalMs: 200 } })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('not listening on a port')

  const requests = corpus(COUNT)
  const exchanges: Exchange[] = []
  const started = Date.now()
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < requests.length) exchanges.push(await exchange(address.port, requests[next++] as CorpusRequest))
  }))
  const seconds = (Date.now() - started) / 1000
  if (process.env.MALFORMED_JSON !== undefined) {
    writeFileSync(process.env.MALFORMED_JSON, exchanges.map(({ request, answers, closedByServer, error, ms }) => JSON.stringify({
      template: request.template, statuses: answers.map((answer) => answer.status), closedByServer, error, ms
    }) + '\n').join(''))
  }
  await app.close()
  await sim.close()

  const off = exchanges.map((each) => ({ each, why: offContract(each) })).filter(({ why }) => why.length > 0)
  const templates = new Set(requests.map((request) => request.template)).size
  console.log(`malformed corpus: ${exchanges.length} requests from ${templates} templates in ${seconds.toFixed(1)} s ` +
    `(concurrency ${CONCURRENCY}, timeout ${TIMEOUT_MS} ms)`)
  console.log(`on contract: ${exchanges.length - off.length}, off contract: ${off.length}`)
  const byTemplate = Map.groupBy(off, ({ each }) => each.request.template)
  for (const [template, cases] of byTemplate) {
    const [first] = cases
    if (first === undefined) continue
    console.log(`\n--- OFF ${template}: ${cases.length} of ${exchanges.filter((each) => each.request.template === template).length}` +
      ` (${[...new Set(cases.flatMap(({ why }) => why))].join('; ')})`)
    console.log(`request (${first.each.ms} ms):\n${show(first.each.request.raw)}\nanswer:\n${show(first.each.raw, 1200) || '(nothing)'}`)
  }
  const tally = new Map<string, number>()
  for (const { answers } of exchanges) {
    const finals = answers.filter((answer) => answer.status >= 100)
    for (const answer of finals.length > 0 ? finals : []) {
      let code = ''
      try { code = String((JSON.parse(answer.body) as { code?: unknown }).code ?? '') } catch {}
      const key = `${answer.status}${code === '' ? '' : ' ' + code}`
      tally.set(key, (tally.get(key) ?? 0) + 1)
    }
    if (answers.length === 0) tally.set('(no answer)', (tally.get('(no answer)') ?? 0) + 1)
  }
  console.log('\nanswers by status and code (every answer of an exchange, interim ones included):')
  for (const [key, n] of [...tally].sort(([a], [b]) => a.localeCompare(b))) console.log(`  ${key.padEnd(36)} ${n}`)
  const slowest = Math.max(...exchanges.map((each) => each.ms))
  console.log(`\nslowest exchange: ${slowest} ms`)
  process.exitCode = off.length > 0 ? 1 : 0
}

await main()
