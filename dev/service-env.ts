import type { Simulator } from './simulator.ts'

/** The service's variables that point it at `sim`, with the credentials it accepts. */
export function serviceEnv (sim: Pick<Simulator, 'baseUrl' | 'authUrl' | 'options'>): Record<string, string> {
  return { UPSTREAM_BASE_URL: sim.baseUrl, AUTH_URL: sim.authUrl, CLIENT_ID: sim.options.clientId, CLIENT_SECRET: sim.options.clientSecret }
}
