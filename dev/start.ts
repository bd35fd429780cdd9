import { startSimulator } from './simulator.ts'

// `npm run dev`: the upstream simulator in this process, then the real server entry in front of it,
// with the in-process cache. Variables already set in the environment win over these defaults.
const simulator = await startSimulator({ port: Number(process.env.SIM_PORT ?? 4010), latencyMs: 30 })
process.env.UPSTREAM_BASE_URL ??= simulator.baseUrl
process.env.AUTH_URL ??= simulator.authUrl
process.env.CLIENT_ID ??= simulator.options.clientId
process.env.CLIENT_SECRET ??= simulator.options.clientSecret
// No load balancer to drain on a developer's machine: Ctrl-C stops at once.
process.env.SHUTDOWN_DELAY_MS ??= '0'
process.stdout.write(`upstream simulator on ${simulator.url} (unknown members: usernames starting with "ghost")\n`)

await import('../src/server.ts')
process.stdout.write(`try: curl http://127.0.0.1:${process.env.PORT ?? 3000}/profile/alice\n`)
