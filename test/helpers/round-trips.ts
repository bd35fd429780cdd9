import type { FastifyInstance } from 'fastify'
import type { Command } from 'ioredis'
import type {} from '../../src/plugins/redis.ts'

/** Every reply of the app's Redis client comes this much later: a Redis far enough away that a waited reply shows. */
const REPLY_DELAY_MS = 20

export interface RoundTrips {
  /** The longest chain of Redis replies the answer waited for, one after another. */
  awaited: number
  /** Each command the request sent, with its place in that chain (1: sent before any reply arrived). */
  commands: string[]
}

/**
 * How many Redis round trips `url`'s answer waited for, one after another: each reply of the app's client is held
 * `REPLY_DELAY_MS` (a slower Redis), and each command is placed one after the latest reply delivered before it was
 * sent. A command the request does not wait for (a count synced in the background) is sent beside the others and
 * adds no place; the answer waited for as many as the replies delivered before it. The health probe's TIME is left
 * alone; a background command sent during the request (the clients' counts synced) would add a place it did not wait for,
 * so `remoteAddress` names a client with nothing to sync, or `background` tells the commands whose replies place nothing
 * (the syncs of an app that served many clients).
 */
export async function roundTripsOf (
  app: FastifyInstance, url: string, remoteAddress = '127.0.0.1', background: (command: Command) => boolean = () => false
): Promise<RoundTrips & { statusCode: number, cache: string }> {
  const client = app.redisLayer?.client
  if (client === undefined) throw new Error('the app has no Redis')
  let delivered = 0
  const commands: string[] = []
  const original = client.sendCommand
  client.sendCommand = function (this: typeof client, command: Command, ...rest: unknown[]) {
    if (command.name !== 'time') {
      const place = delivered + 1
      commands.push(`${place}:${command.name}`)
      const { resolve, reject } = command
      const places = !background(command)
      const later = (settle: () => void): void => {
        setTimeout(() => {
          if (places) delivered = Math.max(delivered, place)
          settle()
        }, REPLY_DELAY_MS)
      }
      command.resolve = (value) => { later(() => resolve(value)) }
      command.reject = (error) => { later(() => reject(error)) }
    }
    return (original as (...args: unknown[]) => unknown).call(this, command, ...rest)
  } as typeof client.sendCommand
  try {
    const res = await app.inject({ url, remoteAddress })
    return { awaited: delivered, commands, statusCode: res.statusCode, cache: String(res.headers['x-cache']) }
  } finally {
    client.sendCommand = original
  }
}
