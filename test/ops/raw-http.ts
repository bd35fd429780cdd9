import { connect } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppOptions } from '../../src/app.ts'
import { NO_DELAY_SHEDDING, simulator, testConfig, type TestContext } from '../helper.ts'

/** What came back on a raw connection: the answer as parsed, and how the connection ended. */
export interface RawExchange {
  status: number
  headers: Record<string, string>
  body: string
  /** The socket error the client saw (ECONNRESET: the answer may have been lost), if any. */
  error?: string
}

/** The whole service listening on a port of its own (raw sockets need one), closed with the test. */
export async function listeningApp (t: TestContext, env: Record<string, string> = {}, options: Partial<AppOptions> = {}): Promise<number> {
  return (await listening(t, env, options)).port
}

/** listeningApp, with the app itself (its server's sockets, say). */
export async function listening (t: TestContext, env: Record<string, string> = {}, options: Partial<AppOptions> = {}): Promise<{ app: FastifyInstance, port: number }> {
  const sim = await simulator(t)
  const app = await buildApp({ config: testConfig(t, sim, env), loadShedding: NO_DELAY_SHEDDING, ...options })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('not listening on a port')
  return { app, port: address.port }
}

/**
 * Sends `request` as it is (parts one after the other, each once the previous one has left, as a client
 * sending a large body does), and reads until the server closes the connection.
 */
export async function exchange (port: number, request: string | Buffer | Array<string | Buffer>): Promise<RawExchange> {
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  let error: string | undefined
  const closed = new Promise((resolve) => socket.once('close', resolve))
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('error', (failure: NodeJS.ErrnoException) => { error = failure.code })
  for (const part of [request].flat()) {
    if (!socket.writable) break
    await new Promise((resolve) => socket.write(part, resolve))
  }
  await closed
  return { ...parse(Buffer.concat(chunks).toString('latin1')), ...(error !== undefined && { error }) }
}

function parse (answer: string): Omit<RawExchange, 'error'> {
  const end = answer.indexOf('\r\n\r\n')
  const [statusLine = '', ...lines] = answer.slice(0, end).split('\r\n')
  const headers = Object.fromEntries(lines.map((line) => {
    const colon = line.indexOf(':')
    return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]
  }))
  return { status: Number(statusLine.split(' ')[1]), headers, body: answer.slice(end + 4) }
}
