import { buildApp } from './src/app.ts'
import { loadConfig } from './src/config.ts'
import { startSimulator } from './dev/simulator.ts'
const sim = await startSimulator({})
const config = loadConfig({ UPSTREAM_BASE_URL: sim.baseUrl, AUTH_URL: sim.authUrl, CLIENT_ID: sim.options.clientId, CLIENT_SECRET: sim.options.clientSecret, LOG_LEVEL: 'silent', REDIS_URL: '' })
for (let i = 0; i < 6; i++) {
  const t0 = performance.now()
  const app = await buildApp({ config })
  await app.ready()
  const t1 = performance.now()
  const r = await app.inject('/profile/alice')
  const t2 = performance.now()
  await app.close()
  console.log('build+ready', (t1 - t0).toFixed(0), 'first inject', (t2 - t1).toFixed(0), 'close', (performance.now() - t2).toFixed(0), r.statusCode)
}
await sim.close()
