/** A token in use, with the times its renewal and expiry are counted from. */
export interface AccessToken {
  value: string
  issuedAt: number
  expiresAt: number
}
