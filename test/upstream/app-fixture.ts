import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'

/** `n` usernames nobody else asks for, so that the cache cannot answer for the upstream. */
export function usernames (n: number, stem = 'member'): string[] {
  return Array.from({ length: n }, (_, i) => `${stem}-${i}`)
}

/** Asks for every profile at once. */
export async function profiles (app: FastifyInstance, names: string[]): Promise<LightMyRequestResponse[]> {
  return await Promise.all(names.map(async (name) => await app.inject(`/profile/${name}`)))
}

/** Statuses and codes of answers, counted: `{ '200': 12, '503 UPSTREAM_OVERLOADED': 3 }`. */
export function tally (responses: LightMyRequestResponse[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const res of responses) {
    const key = res.statusCode === 200 ? '200' : `${res.statusCode} ${String((res.json() as { code?: string }).code)}`
    counts[key] = (counts[key] ?? 0) + 1
  }
  return counts
}

/** Start-up never waits for Redis; a test about sharing through it does. */
export async function redisReady (app: FastifyInstance): Promise<void> {
  const redis = app.redis
  if (redis !== undefined && redis.status !== 'ready') await once(redis, 'ready')
}

/** Waits (bounded) for something that happens in the background, such as a revalidation. */
export async function eventually (condition: () => boolean, timeoutMs = 3_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) return false
    await sleep(10)
  }
  return true
}
