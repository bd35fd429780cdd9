import { LRUCache } from 'lru-cache'

/** RATE_LIMIT_PER_MINUTE counts each client's requests over this window. */
export const RATE_LIMIT_WINDOW_MS = 60_000

/**
 * Clients one instance counts at once (with Redis, held for the next sync and idle each): a count costs ~140 bytes
 * (IPv4; ~230 for IPv6, `node --expose-gc bench/rate-limit-memory.ts`), so 14-23 MiB, twice that with Redis.
 */
export const RATE_LIMIT_CLIENTS = 100_000

/**
 * A map of at most `maxClients` clients, least recently seen out first. Bounded by size, one per client, rather than by
 * lru-cache's `max`, which allocates every slot up front: 100,000 per app built was a quarter of an app's start-up CPU.
 */
export function clientLru<V extends NonNullable<unknown>> (maxClients = RATE_LIMIT_CLIENTS): LRUCache<string, V> {
  return new LRUCache<string, V>({ maxSize: maxClients, sizeCalculation: () => 1 })
}
