import { promisify } from 'node:util'
import { brotliCompress, constants, gzip } from 'node:zlib'
import { LRUCache } from 'lru-cache'

export type Coding = 'br' | 'gzip'

/** A body's compressed representations, made once per version (one ETag). */
export type Encodings = Record<Coding, Buffer>

/**
 * Below about one TCP segment (~1.4 KB of payload) compression saves no round trip, and a small JSON
 * body gains little next to its headers; a profile (~400 B) is sent as it is, a timeline or a batch is
 * worth encoding.
 */
export const MIN_ENCODED_BYTES = 1400

/** What a kept encoding costs beside its bytes (its tag, its record, the LRU's slot: about 510 B measured): many small ones stay bounded too. */
const ENTRY_OVERHEAD_BYTES = 512

const compressors: Record<Coding, (body: string) => Promise<Buffer>> = {
  // Quality 9 of 11: close to the best ratio for JSON at a fraction of the time; paid once per version.
  br: async (body) => await promisify(brotliCompress)(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 9 } }),
  gzip: async (body) => await promisify(gzip)(body, { level: 9 })
}

export interface EncodedBodiesOptions {
  /** Memory held by the encodings kept (the least recently served go first). */
  maxBytes?: number
  compress?: Record<Coding, (body: string) => Promise<Buffer>>
}

/**
 * The brotli and gzip encodings of bodies large enough to gain, memoised by ETag: a tag names one
 * version of one body, so each version is compressed once per instance, by the request that served
 * it first (on the instance that loaded it, the MISS), and every later answer sends the stored bytes.
 * Kept beside the cache rather than in its entries, so the stored entry format stays as it is.
 */
export class EncodedBodies {
  readonly #compress: NonNullable<EncodedBodiesOptions['compress']>
  readonly #done: LRUCache<string, Encodings>
  readonly #pending = new Map<string, Promise<Encodings>>()

  constructor ({ maxBytes = 32 * 1024 * 1024, compress = compressors }: EncodedBodiesOptions = {}) {
    this.#compress = compress
    this.#done = new LRUCache({ maxSize: maxBytes, sizeCalculation: (value) => value.br.length + value.gzip.length + ENTRY_OVERHEAD_BYTES })
  }

  /** The encodings of `body` (whose tag is `etag`), or undefined when it is too small to gain. */
  async get (etag: string, body: string): Promise<Encodings | undefined> {
    if (!worthEncoding(body)) return undefined
    const done = this.#done.get(etag)
    if (done !== undefined) return done
    let pending = this.#pending.get(etag)
    if (pending === undefined) {
      pending = this.#encode(body).finally(() => this.#pending.delete(etag))
      this.#pending.set(etag, pending)
    }
    // A failed compression costs the caller nothing: the body goes out as it is (and is tried again next time).
    const encodings = await pending.catch(() => undefined)
    if (encodings !== undefined) this.#done.set(etag, encodings)
    return encodings
  }

  /** The encodings already made for this tag, if any: a hit on a large body sends them without a promise. */
  peek (etag: string): Encodings | undefined {
    return this.#done.get(etag)
  }

  async #encode (body: string): Promise<Encodings> {
    const [br, gzipped] = await Promise.all([this.#compress.br(body), this.#compress.gzip(body)])
    return { br: ownBytes(br), gzip: ownBytes(gzipped) }
  }
}

/**
 * The bytes of `buffer` in memory of their own. zlib answers a view of its 64 KiB output chunk: kept as it is, a few
 * hundred bytes counted held 64 KiB each (an audit: 2,000 encodings counted as 4.2 MB held 87 MB).
 */
function ownBytes (buffer: Buffer): Buffer {
  const own = Buffer.allocUnsafeSlow(buffer.length)
  buffer.copy(own)
  return own
}

/** Whether `body` is large enough to gain from compression (see MIN_ENCODED_BYTES). */
export function worthEncoding (body: string): boolean {
  // A UTF-16 unit is at most 3 UTF-8 bytes: most bodies are known small without counting their bytes.
  return body.length * 3 >= MIN_ENCODED_BYTES && Buffer.byteLength(body) >= MIN_ENCODED_BYTES
}

/**
 * What the encodings of `body` hold once made, for the in-process store to count with its entry (0: none are made).
 * Brotli and gzip of JSON together measured at most 0.7 of the body at 1.4 KB, less above: counted as the body's size.
 */
export function encodedBytes (body: string): number {
  return worthEncoding(body) ? Buffer.byteLength(body) : 0
}

/**
 * The caller's preferred coding we have, from Accept-Encoding (RFC 9110 §12.5.3): brotli over gzip
 * (smaller), `*` standing for either, `q=0` refusing one, and none when the caller weighs `identity` (named, or
 * through `*`) above it; an unnamed `identity` does not compete.
 */
export function preferredCoding (acceptEncoding: string | undefined): Coding | undefined {
  if (acceptEncoding === undefined) return undefined
  const weights = new Map<string, number>()
  for (const part of acceptEncoding.split(',')) {
    const [name = '', ...params] = part.trim().toLowerCase().split(';')
    const q = params.map((param) => /^\s*q=([\d.]+)\s*$/.exec(param)?.[1]).find((value) => value !== undefined)
    weights.set(name.trim(), q === undefined ? 1 : Number(q))
  }
  const weight = (coding: Coding | 'identity'): number => weights.get(coding) ?? weights.get('*') ?? 0
  const coding = weight('br') >= weight('gzip') ? 'br' : 'gzip'
  return weight(coding) > 0 && weight(coding) >= weight('identity') ? coding : undefined
}
