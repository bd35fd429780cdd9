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
