/** When a token is renewed, when it stops being sent, and how long after a failed exchange the next one may start. */

import type { AccessToken } from './access-token.ts'

/** Renew this long before the announced expiry (at most 20% of the life of a short-lived token). */
const REFRESH_SKEW_MS = 30_000
/** Stop sending a token this long before expiry (at most 10% of its life): a call must arrive before it dies. */
const EXPIRY_MARGIN_MS = 5_000
/**
 * Back-off after a failed exchange, from the failure: 1 to 1.5 s, at random. Never under 1 s (a failing provider gets
 * at most one exchange a second from the deployment, through the shared window) nor over 1.5 s: with the exchange's
 * own deadline, callers have a token within 2.5 s of the provider's return, however long it was away (issue 32 point
 * 3: within 3 s; a cap of 5 s, reached by the third failure, took up to 7.8 s in `BENCH_PHASES=scenarios`).
 */
const RETRY_MIN_MS = 1_000
const RETRY_MAX_MS = 1_500

/** When to renew: REFRESH_SKEW_MS before expiry, or at 80% of the life of a short-lived token. */
export function renewalDue (token: AccessToken): number {
  return token.expiresAt - Math.min(REFRESH_SKEW_MS, (token.expiresAt - token.issuedAt) * 0.2)
}

/** The last moment a token is sent: EXPIRY_MARGIN_MS before expiry, or at 90% of a short life. */
export function usableUntil (token: AccessToken): number {
  return token.expiresAt - Math.min(EXPIRY_MARGIN_MS, (token.expiresAt - token.issuedAt) * 0.1)
}

/** The back-off, spread at random so that instances take turns. */
export function retryDelay (random: number): number {
  return Math.round(RETRY_MIN_MS + random * (RETRY_MAX_MS - RETRY_MIN_MS))
}

/**
 * An exchange unanswered this long has failed, whatever UPSTREAM_TIMEOUT_MS (a shorter one ends its callers' waits,
 * not the exchange: plugins/upstream.ts): a token request is one small POST, and a hung provider must be retried on
 * the back-off's schedule, so that callers recover within about 3 s of its return (this, then the first back-off of
 * 1 to 1.5 s). Its callers are refused from then, but its answer is still taken until the retry is due: a provider
 * that answers in 1.2 s (aborted at 1 s and retried, it never served) is slow, not failing.
 */
export const EXCHANGE_DEADLINE_MS = 1_000
/** The longest an exchange runs: its deadline, then the longest back-off, when its retry replaces it. */
export const LONGEST_EXCHANGE_MS = EXCHANGE_DEADLINE_MS + RETRY_MAX_MS
