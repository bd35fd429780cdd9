import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

const ALGORITHM = 'aes-256-gcm'
const FORMAT = 'v1'
const IV_BYTES = 12
const TAG_BYTES = 16
/** Fixed salt: the key must be the same on every instance holding the same secret. */
const SALT = 'profile-bff/token-store'

/**
 * Seals the upstream token for storage outside the process (Redis): AES-256-GCM under a key derived
 * from the client secret with HKDF, so whoever reads Redis without the secret learns nothing usable.
 * `context` (the Redis key) is authenticated too: a sealed value copied under another key does not open.
 */
export class TokenCipher {
  readonly #key: Buffer
  /**
   * Names this secret's keys in Redis, revealing nothing of it: instances holding another secret (a rotation under
   * way, one pod misconfigured) share neither the token nor the failures of the identity provider with these.
   */
  readonly keyId: string

  constructor (clientSecret: string) {
    this.#key = Buffer.from(hkdfSync('sha256', clientSecret, SALT, 'aes-256-gcm token at rest', 32))
    this.keyId = Buffer.from(hkdfSync('sha256', clientSecret, SALT, 'key id', 6)).toString('base64url')
  }

  seal (plain: string, context: string): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv(ALGORITHM, this.#key, iv, { authTagLength: TAG_BYTES })
    cipher.setAAD(Buffer.from(context))
    const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
    return [FORMAT, iv, cipher.getAuthTag(), ciphertext].map((part) => typeof part === 'string' ? part : part.toString('base64url')).join('.')
  }

  /** The plain text, or undefined when `sealed` is not ours (another secret, tampered, another format). */
  open (sealed: string, context: string): string | undefined {
    const [format, iv, tag, ciphertext, ...rest] = sealed.split('.')
    if (format !== FORMAT || iv === undefined || tag === undefined || ciphertext === undefined || rest.length > 0) return undefined
    try {
      const decipher = createDecipheriv(ALGORITHM, this.#key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES })
      decipher.setAAD(Buffer.from(context))
      decipher.setAuthTag(Buffer.from(tag, 'base64url'))
      return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8')
    } catch {
      return undefined
    }
  }
}
