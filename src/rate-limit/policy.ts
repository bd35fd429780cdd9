import { LRUCache } from 'lru-cache'

/** RATE_LIMIT_PER_MINUTE counts each client's requests over this window. */
export const RATE_LIMIT_WINDOW_MS = 60_000

/**
 * Clients one instance counts at once (with Redis, held for the next sync and idle each): 15-23 MiB without Redis,
 * 26-42 MiB with it (IPv4 to IPv6 clients; `npx node --expose-gc bench/rate-limit-memory.ts`).
 */
export const RATE_LIMIT_CLIENTS = 100_000

/**
 * A map of at most `maxClients` clients, least recently seen out first. Bounded by size, one per client, rather than by
 * lru-cache's `max`, which allocates every slot up front: 100,000 per app built was a quarter of an app's start-up CPU.
 */
export function clientLru<V extends NonNullable<unknown>> (maxClients = RATE_LIMIT_CLIENTS): LRUCache<string, V> {
  return new LRUCache<string, V>({ maxSize: maxClients, sizeCalculation: () => 1 })
}
