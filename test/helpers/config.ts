import { loadConfig, type Config } from '../../src/config.ts'

/** The default configuration (and `env`), for a unit built without an app: its addresses are never dialled. */
export function unitConfig (env: Record<string, string> = {}): Config {
  return loadConfig({
    UPSTREAM_BASE_URL: 'http://upstream.invalid',
    AUTH_URL: 'http://auth.invalid',
    CLIENT_ID: 'unit-client',
    CLIENT_SECRET: 'unit-secret',
    ...env
  })
}
