import type { RatioMedian, TargetSummary } from './rounds.ts'
import { cleanHits } from './rounds.ts'

// How the report writes its figures.

/** `0.58x (4 of 5 rounds valid)`; with no valid round, the median of every round, so that a busy run still says something. */
export function ratioText (ratio: RatioMedian, short = false): string {
  if (ratio.validRounds === 0) return `n/a (0 of ${ratio.rounds} valid; all rounds: ${times(ratio.all)})`
  return short ? `${times(ratio.valid)} (${ratio.validRounds}/${ratio.rounds})` : `${times(ratio.valid)} (${ratio.validRounds} of ${ratio.rounds} rounds valid)`
}

export function hitCaveat (target: TargetSummary): string {
  if (cleanHits(target)) return ''
  return `, but not every answer was a 200 HIT (errors ${target.errors}; status >= 400: ${count(target.non2xx)}` +
    `${target.statuses === undefined ? '' : `; statuses ${statuses(target.statuses)}`}${target.xCache === undefined ? '' : `; X-Cache ${statuses(target.xCache)}`})`
}

export function missing (from: string[], other: string[]): string[] {
  return from.filter((name) => !other.includes(name))
}

export function times (value: number): string {
  return Number.isNaN(value) ? 'n/a' : `${value.toFixed(2)}x`
}

export function ms (value: number): string {
  return `${value < 10 ? value.toFixed(2) : value.toFixed(1)} ms`
}

/** `+1.50 ms`, `-3.78 ms`; no sign on what rounds to zero. */
export function signedMs (value: number): string {
  const magnitude = ms(Math.abs(value))
  return magnitude.startsWith('0.00 ') ? magnitude : `${value > 0 ? '+' : '-'}${magnitude}`
}

export function us (value: number): string {
  return Number.isNaN(value) ? 'n/a' : `${value.toFixed(1)} µs`
}

export function pct (share: number): string {
  return Number.isNaN(share) ? 'n/a' : `${Math.round(share * 100)}%`
}

export function mib (bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
}

export function count (value: number): string {
  return Number.isNaN(value) ? 'n/a' : value.toLocaleString('en-US')
}

export function statuses (counts: Record<string, number>): string {
  return Object.entries(counts).map(([value, n]) => `${value}: ${count(n)}`).join(', ') || 'none'
}

/** Shares of `total` (the responses wrk counted; the service counts a few more, those in flight when wrk stopped). */
export function servedCounts (counts: Record<string, number>, total: number): string {
  return Object.entries(counts).map(([value, n]) => `${value} ${count(n)}`).join(', ') + ` (wrk: ${count(total)})`
}

/** Where a herd came from (BENCH_SHELTER_CLIENTS). */
export function fromClients (clients: number): string {
  return clients > 1 ? `from ${count(clients)} client addresses (X-Forwarded-For, TRUST_PROXY on)` : 'from one address'
}
