import { LocalRateCounts } from '../src/rate-limit/rate-counts.ts'
import { RATE_LIMIT_WINDOW_MS } from '../src/rate-limit/policy.ts'

// Heap per client of the in-process rate counts (no REDIS_URL), which sizes RATE_LIMIT_CLIENTS:
//   node --expose-gc bench/rate-limit-memory.ts [clients]

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')
const clients = Number(process.argv[2] ?? 100_000)

function heapPerClient (address: (n: number) => string): number {
  gc?.()
  const before = process.memoryUsage().heapUsed
  const counts = new LocalRateCounts({ windowMs: RATE_LIMIT_WINDOW_MS, maxClients: clients, now: Date.now })
  let counted = 0
  for (let n = 0; n < clients; n++) if (counts.add(address(n), 1).current === 1) counted++
  gc?.()
  const bytes = process.memoryUsage().heapUsed - before
  if (counted !== clients) throw new Error('the counts dropped clients')
  // Held until here, so the measurement above includes them.
  counts.add(address(0), 1)
  return Math.round(bytes / clients)
}

const ipv4 = heapPerClient((n) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`)
const ipv6 = heapPerClient((n) => `2001:db8:${(n >> 16).toString(16)}:${(n & 0xffff).toString(16)}::`)
process.stdout.write(`${clients} clients: ${ipv4} bytes each (IPv4), ${ipv6} bytes each (IPv6, their /64 as the rate limit keys it)\n`)
