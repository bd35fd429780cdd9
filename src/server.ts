import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, type Config } from './config.js'

// The only module that reads process.env, picks the log transport and listens.
// Behaviour never depends on NODE_ENV: everything is in the configuration.

/** How long in-flight requests may take to finish once SIGTERM arrives. */
const SHUTDOWN_GRACE_MS = 10_000

let config: Config
try {
  config = loadConfig(process.env)
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  process.stderr.write(`profile-bff: configuration error: ${error.message}\n`)
  process.exit(1)
}

const app = await buildApp({
  config,
  logger: {
    level: config.LOG_LEVEL,
    ...(process.stdout.isTTY && { transport: { target: 'pino-pretty' } })
  }
})

closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
  if (err !== undefined) app.log.error({ err }, 'closing after an unexpected error')
  else app.log.info({ signal }, 'closing')
  await app.close()
})

await app.listen({ host: config.HOST, port: config.PORT })
