// First, so that V8 runs the whole app with this flag.
import './v8-flags.ts'
import closeWithGrace from 'close-with-grace'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from './app.ts'
import { ConfigError, loadConfig, type Config } from './config.ts'
import { loadBudget } from './load-budget.ts'
import { BatchedLogOutput, loggerOptions } from './logging/logging.ts'
import { tracingConfigured } from './telemetry/tracing.ts'
import { warmUp } from './warm-up.ts'

// The only module that reads process.env, picks the log transport and listens.
// Behaviour never depends on NODE_ENV: everything is in the configuration.

/**
 * Idle keep-alive connections stay open longer than a load balancer's usual 60 s idle timeout, so the
 * balancer, not us, closes them: otherwise it may send a request on a connection we are closing (a 502).
 */
const KEEP_ALIVE_TIMEOUT_MS = 65_000

/** A listen failure leaves nothing to finish: closing Redis and the pools takes a moment, and never holds the exit longer. */
const CLOSE_AFTER_LISTEN_FAILURE_MS = 5_000

/** Signals that stop nothing: a closed terminal (SIGHUP) or a stray kill must not take an instance out. */
const IGNORED_SIGNALS = ['SIGHUP', 'SIGQUIT', 'SIGUSR2'] as const

let config: Config
try {
  config = loadConfig(process.env)
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  process.stderr.write(`profile-bff: configuration error: ${error.message}\n`)
  process.exit(1)
}

/** Off a terminal, log lines are written in batches (see BatchedLogOutput); what is left at exit, then. */
function batchedStdout (): BatchedLogOutput {
  const output = new BatchedLogOutput(process.stdout)
  process.on('exit', output.flush)
  return output
}

// Compiled before the first request (warm-up.ts): a fresh instance may meet a herd as soon as it listens.
const warmed = await warmUp(config)
const app = await buildApp({
  config,
  logger: {
    ...loggerOptions(config.LOG_LEVEL, tracingConfigured(config)),
    ...(process.stdout.isTTY ? { transport: { target: 'pino-pretty' } } : { stream: batchedStdout() })
  }
})
app.server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS

for (const signal of IGNORED_SIGNALS) process.on(signal, () => app.log.warn({ signal }, 'signal ignored: only SIGTERM or SIGINT stops the service'))

// On SIGTERM (or SIGINT): /readyz answers 503 at once while requests are still accepted and served for
// SHUTDOWN_DELAY_MS, so that a load balancer stops routing here first; then stop accepting, let the
// requests in flight finish, close Redis and the upstream pools (the plugins' onClose hooks) and exit 0.
// Requests still running SHUTDOWN_TIMEOUT_MS after that are abandoned and the process exits 1; a second
// signal exits at once. After an unexpected error there is nothing to wait for: it closes at once.
closeWithGrace({
  delay: config.SHUTDOWN_DELAY_MS + config.SHUTDOWN_TIMEOUT_MS,
  logger: app.log,
  skip: [...IGNORED_SIGNALS]
}, async ({ signal, err }) => {
  app.beginClosing()
  if (err !== undefined) {
    app.log.error({ err }, 'closing after an unexpected error')
  } else if (signal !== undefined) {
    app.log.info({ signal, delayMs: config.SHUTDOWN_DELAY_MS }, 'shutting down: readiness fails, still serving')
    await sleep(config.SHUTDOWN_DELAY_MS)
  }
  app.log.info('closing: finishing the requests in flight')
  await app.close()
  app.log.info('closed')
})

if ('ms' in warmed) app.log.info({ ms: warmed.ms }, 'warmed up: the request path is compiled')
else app.log.warn({ err: warmed.error }, 'warm-up skipped: the first requests run on code not compiled yet')
const { drainMs } = loadBudget(config)
if (config.SHUTDOWN_TIMEOUT_MS < drainMs) {
  app.log.warn({ shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS, drainMs },
    'SHUTDOWN_TIMEOUT_MS is under twice UPSTREAM_TIMEOUT_MS: a shutdown may abandon an upstream call sent late, and its username is loaded again')
}
try {
  await app.listen({ host: config.HOST, port: config.PORT })
} catch (error) {
  // Not an unexpected error but a setting to change: one line naming it, what was opened closed, and no stack.
  process.stderr.write(`profile-bff: cannot listen on HOST=${config.HOST} PORT=${config.PORT}: ${listenFailure(error, config.PORT)}\n`)
  await Promise.race([app.close(), sleep(CLOSE_AFTER_LISTEN_FAILURE_MS)])
  process.exit(1)
}

/** Why `listen` failed, for the operator: which of HOST and PORT to change. */
function listenFailure (error: unknown, port: number): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  switch (code) {
    case 'EADDRINUSE': return 'PORT is already in use on HOST, by another process (EADDRINUSE)'
    case 'EACCES': return `permission denied${port < 1024 ? ' (a PORT below 1024 needs privileges)' : ''} (EACCES)`
    case 'EADDRNOTAVAIL': return 'HOST is not an address of this machine (EADDRNOTAVAIL)'
    case 'EAFNOSUPPORT': return 'this machine does not support HOST\'s address family (EAFNOSUPPORT)'
    case 'ENOTFOUND': case 'EAI_AGAIN': case 'EAI_FAIL': case 'EAI_NONAME':
      return `HOST does not resolve to an address (${code})`
    default: return code ?? (error instanceof Error ? error.message : String(error)).split('\n', 1)[0] ?? 'failed'
  }
}
