/** When a token is renewed, when it stops being sent, and how long after a failed exchange the next one may start. */

import type { AccessToken } from './access-token.ts'

/** Renew this long before the announced expiry (at most 20% of the life of a short-lived token). */
const REFRESH_SKEW_MS = 30_000
/** Stop sending a token this long before expiry (at most 10% of its life): a call must arrive before it dies. */
const EXPIRY_MARGIN_MS = 5_000
/**
 * Back-off after a failed exchange: doubles from the base up to the cap, with jitter. Never under 1 s
 * (a failing provider gets at most one exchange a second) nor over 5 s (callers recover soon after it does).
 */
const RETRY_BASE_MS = 2_000
const RETRY_CAP_MS = 5_000

/** When to renew: REFRESH_SKEW_MS before expiry, or at 80% of the life of a short-lived token. */
export function renewalDue (token: AccessToken): number {
  return token.expiresAt - Math.min(REFRESH_SKEW_MS, (token.expiresAt - token.issuedAt) * 0.2)
}

/** The last moment a token is sent: EXPIRY_MARGIN_MS before expiry, or at 90% of a short life. */
export function usableUntil (token: AccessToken): number {
  return token.expiresAt - Math.min(EXPIRY_MARGIN_MS, (token.expiresAt - token.issuedAt) * 0.1)
}

/** Exponential back-off with "equal jitter": half the step fixed, half random, so instances spread out. */
export function retryDelay (attempt: number, random: number): number {
  const step = Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** (attempt - 1))
  return Math.round(step / 2 + random * step / 2)
}

/**
 * An exchange unanswered this long has failed (sooner when UPSTREAM_TIMEOUT_MS is shorter): a token request is one
 * small POST, and a hung provider must be retried on the back-off's schedule, so that callers recover within
 * about 3 s of its return (this, then the first back-off of 1 to 2 s).
 */
export const EXCHANGE_DEADLINE_MS = 1_000
