import { createRequire } from 'node:module'

// Heap per client of @fastify/rate-limit's in-process store, which sizes RATE_LIMIT_CLIENTS:
//   node --expose-gc --import tsx bench/rate-limit-memory.ts [clients]

interface CountStore { incr: (key: string, answer: () => void, windowMs: number, max: number) => void, lru: { size: number } }
type LocalStoreCtor = new (continueExceeding: boolean, exponentialBackoff: boolean, cache: number) => CountStore

const LocalStore = createRequire(import.meta.url)('@fastify/rate-limit/store/LocalStore.js') as LocalStoreCtor
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')
const clients = Number(process.argv[2] ?? 100_000)

function heapPerClient (address: (n: number) => string): number {
  gc?.()
  const before = process.memoryUsage().heapUsed
  const store = new LocalStore(false, false, clients)
  for (let n = 0; n < clients; n++) store.incr(address(n), () => {}, 60_000, 600)
  gc?.()
  const bytes = process.memoryUsage().heapUsed - before
  if (store.lru.size !== clients) throw new Error('the store dropped clients')
  return Math.round(bytes / clients)
}

const ipv4 = heapPerClient((n) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`)
const ipv6 = heapPerClient((n) => `2001:db8:${(n >> 16).toString(16)}:${(n & 0xffff).toString(16)}:1:2:3:4`)
process.stdout.write(`${clients} clients: ${ipv4} bytes each (IPv4), ${ipv6} bytes each (IPv6)\n`)
