import { LocalRateCounts } from '../src/rate-limit/rate-counts.ts'
import { RATE_LIMIT_WINDOW_MS } from '../src/rate-limit/policy.ts'
import { SharedRateCounts } from '../src/rate-limit/shared-rate-counts.ts'
import { clientAddress } from './socket-burst.ts'

// Heap per client of the rate counts, which sizes RATE_LIMIT_CLIENTS: in process (no REDIS_URL), and shared through
// Redis while Redis is down, every client held for the next sync and as many idle (the most it keeps):
//   npx node --expose-gc bench/rate-limit-memory.ts [clients]

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')
const clients = Number(process.argv[2] ?? 100_000)
/** One instant: a window that ended during the run would let the counts go. */
const NOW = 1_000 * RATE_LIMIT_WINDOW_MS + 1

function heapPerClient (address: (n: number) => string): number {
  gc?.()
  const before = process.memoryUsage().heapUsed
  const counts = new LocalRateCounts({ windowMs: RATE_LIMIT_WINDOW_MS, maxClients: clients, now: () => NOW })
  let counted = 0
  for (let n = 0; n < clients; n++) if (counts.add(address(n), 1).current === 1) counted++
  gc?.()
  const bytes = process.memoryUsage().heapUsed - before
  if (counted !== clients) throw new Error('the counts dropped clients')
  // Held until here, so the measurement above includes them.
  counts.add(address(0), 1)
  return Math.round(bytes / clients)
}

/** Twice `clients` new clients with Redis down: the cap's worth held for the next sync, the first ones idle. */
async function sharedHeapAtCap (address: (n: number) => string): Promise<number> {
  gc?.()
  const before = process.memoryUsage().heapUsed
  const down = { up: false, run: async () => { throw new Error('redis is down') } }
  const counts = new SharedRateCounts({ redis: { eval: async () => [] }, health: down, keyPrefix: 'm:', windowMs: RATE_LIMIT_WINDOW_MS, syncIntervalMs: 3_600_000, maxClients: clients, now: () => NOW, onError: () => {} })
  for (let n = 0; n < 2 * clients; n++) counts.add(address(n), 1)
  gc?.()
  const bytes = process.memoryUsage().heapUsed - before
  if (counts.add(address(0), 1).current !== 2) throw new Error('the first client was not kept as an idle one')
  await counts.close()
  return Math.round(bytes / clients)
}

const ipv4 = clientAddress
const ipv6 = (n: number): string => `2001:db8:${(n >> 16).toString(16)}:${(n & 0xffff).toString(16)}::`
process.stdout.write(`${clients} clients: ${heapPerClient(ipv4)} bytes each (IPv4), ${heapPerClient(ipv6)} bytes each (IPv6, their /64 as the rate limit keys it)\n`)
process.stdout.write(`with Redis down, at the cap (as many held and idle): ${await sharedHeapAtCap(ipv4)} bytes a client of the cap (IPv4), ${await sharedHeapAtCap(ipv6)} (IPv6)\n`)
