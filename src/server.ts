import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, type Config } from './config.js'
import { BatchedLogOutput, loggerOptions } from './logging.js'

// The only module that reads process.env, picks the log transport and listens.
// Behaviour never depends on NODE_ENV: everything is in the configuration.

/**
 * Idle keep-alive connections stay open longer than a load balancer's usual 60 s idle timeout, so the
 * balancer, not us, closes them: otherwise it may send a request on a connection we are closing (a 502).
 */
const KEEP_ALIVE_TIMEOUT_MS = 65_000

let config: Config
try {
  config = loadConfig(process.env)
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  process.stderr.write(`profile-bff: configuration error: ${error.message}\n`)
  process.exit(1)
}

/** Off a terminal, log lines are written once per event-loop turn; what is left at exit, then. */
function batchedStdout (): BatchedLogOutput {
  const output = new BatchedLogOutput(process.stdout)
  process.on('exit', output.flush)
  return output
}

const app = await buildApp({
  config,
  logger: {
    ...loggerOptions(config.LOG_LEVEL),
    ...(process.stdout.isTTY ? { transport: { target: 'pino-pretty' } } : { stream: batchedStdout() })
  }
})
app.server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS

// On SIGTERM (or SIGINT): stop accepting connections, let the requests in flight finish, then close
// Redis and the upstream pools (the plugins' onClose hooks) and exit 0. Requests still running after
// SHUTDOWN_TIMEOUT_MS are abandoned and the process exits 1; a second signal exits at once.
closeWithGrace({ delay: config.SHUTDOWN_TIMEOUT_MS, logger: app.log }, async ({ signal, err }) => {
  if (err !== undefined) app.log.error({ err }, 'closing after an unexpected error')
  else app.log.info({ signal }, 'closing: finishing the requests in flight')
  await app.close()
  app.log.info('closed')
})

await app.listen({ host: config.HOST, port: config.PORT })
