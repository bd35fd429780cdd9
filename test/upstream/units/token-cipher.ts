import t from 'tap'
import { TokenCipher } from '../../../src/upstream/token-cipher.ts'

const cipher = new TokenCipher('client-secret')

t.test('seals and opens; the sealed text holds nothing of the plain text', async (t) => {
  const sealed = cipher.seal('sim_token_value', 'pbff:token')
  t.notMatch(sealed, 'sim_token_value')
  t.notMatch(Buffer.from(sealed.split('.').slice(1).join(''), 'base64url').toString('latin1'), 'sim_token')
  t.equal(cipher.open(sealed, 'pbff:token'), 'sim_token_value')
  t.not(cipher.seal('sim_token_value', 'pbff:token'), sealed, 'a fresh IV each time')
})

t.test('refuses another secret, another key, a tampered or foreign value', async (t) => {
  const sealed = cipher.seal('sim_token_value', 'pbff:token')
  t.equal(new TokenCipher('another-secret').open(sealed, 'pbff:token'), undefined)
  t.equal(cipher.open(sealed, 'other:token'), undefined)
  const [format, iv, tag, body = ''] = sealed.split('.')
  const flipped = Buffer.from(body, 'base64url')
  flipped[0] = (flipped[0] ?? 0) ^ 1
  t.equal(cipher.open([format, iv, tag, flipped.toString('base64url')].join('.'), 'pbff:token'), undefined)
  t.equal(cipher.open('sim_token_value', 'pbff:token'), undefined)
  t.equal(cipher.open(`${sealed}.extra`, 'pbff:token'), undefined)
})
