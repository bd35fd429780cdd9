import { startSimulator } from './simulator.ts'

// The simulator as a process of its own (docker compose, benchmarks). Configured by SIM_* variables.
const env = process.env
const simulator = await startSimulator({
  port: Number(env.SIM_PORT ?? 4010),
  host: env.SIM_HOST ?? '127.0.0.1',
  clientId: env.CLIENT_ID ?? 'dev-client',
  clientSecret: env.CLIENT_SECRET ?? 'dev-secret',
  ...(env.AUDIENCE !== undefined && { audience: env.AUDIENCE }),
  tokenTtlSeconds: Number(env.SIM_TOKEN_TTL_SECONDS ?? 3600),
  latencyMs: Number(env.SIM_LATENCY_MS ?? 0)
})
process.stdout.write(`upstream simulator on ${simulator.url} (unknown members: usernames starting with "ghost")\n`)

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => { simulator.close().then(() => process.exit(0), () => process.exit(1)) })
}
