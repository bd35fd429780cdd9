import { Redis } from 'ioredis'

/** A short-lived client of the benchmark's own, failing fast: Redis is a prerequisite, not a variable. */
async function withRedis<T> (url: string, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 1, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    await client.connect()
    return await use(client)
  } finally {
    client.disconnect()
  }
}

export async function assertRedisReachable (url: string): Promise<void> {
  try {
    await withRedis(url, async (client) => await client.ping())
  } catch (error) {
    throw new Error(`Redis at ${url} is not reachable (${(error as Error).message}): start it, or set REDIS_URL`)
  }
}

/** Removes this run's keys from the shared Redis; returns how many there were. */
export async function deleteKeysUnder (url: string, prefix: string): Promise<number> {
  return await withRedis(url, async (client) => {
    let deleted = 0
    for await (const keys of client.scanStream({ match: `${prefix}*`, count: 1_000 })) {
      const batch = keys as string[]
      if (batch.length > 0) deleted += await client.unlink(...batch)
    }
    return deleted
  })
}
