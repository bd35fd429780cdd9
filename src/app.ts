import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import ValidatorSelector from '@fastify/ajv-compiler'
import type { Config } from './config.ts'
import { loggerOptions, OneLinePerRequest, requestId } from './logging/logging.ts'
import { answerHalfClosedRequests } from './http/half-close.ts'
import { sharedSerializers } from './http/shared-serializers.ts'
import { MAX_REQUEST_LINE_OCTETS } from './http/request-line.ts'
import configPlugin from './plugins/config.ts'
import routeConfig from './plugins/route-config.ts'
import errorHandler from './plugins/error-handler.ts'
import httpEdges from './plugins/http-edges.ts'
import redis from './plugins/redis.ts'
import telemetry from './plugins/telemetry.ts'
import tracing from './plugins/tracing.ts'
import { tracingConfigured } from './telemetry/tracing.ts'
import answerHeaders from './plugins/answer-headers.ts'
import gracefulClose from './plugins/graceful-close.ts'
import securityHeaders from './plugins/security-headers.ts'
import cors from './plugins/cors.ts'
import loadShedding, { type LoadSheddingOptions } from './plugins/load-shedding.ts'
import rateLimit from './plugins/rate-limit.ts'
import docs from './plugins/docs.ts'
import metricsRoute from './routes/metrics.ts'
import upstream from './plugins/upstream.ts'
import cache from './plugins/cache.ts'
import healthRoutes from './routes/health.ts'
import profileRoutes from './routes/profiles.ts'
import adminRoutes from './routes/admin.ts'
import { steadyNow } from './steady-clock.ts'

export interface AppOptions {
  config: Config
  /** Pino options, or a logger instance; default: the config's LOG_LEVEL on stdout. */
  logger?: FastifyServerOptions['logger'] | FastifyServerOptions['loggerInstance']
  /** The app's clock: the cache's and the upstream edge's (tests move it); default steadyNow (steady-clock.ts). */
  now?: () => number
  /** Load shedding thresholds; default: plugins/load-shedding.ts's (tests force pressure with them). */
  loadShedding?: LoadSheddingOptions
  /** Limits on slow clients; default SLOW_CLIENT_TIMEOUTS (tests shorten them: node:http's own timers, no fake clock). */
  slowClients?: SlowClientTimeouts
  /** The upstream and the identity provider over this Unix socket rather than their URLs' hosts (warm-up.ts). */
  upstreamSocketPath?: string
}

export interface SlowClientTimeouts {
  /** A request's headers must have arrived this long after it began, else 408 and the connection closes. */
  headersMs: number
  /** The whole request, body included. */
  requestMs: number
  /** How often node:http looks for connections past those limits (its default, 30 s, would add that much). */
  checkIntervalMs: number
}

/** A GET API's requests are a few hundred bytes: a client still sending after seconds is stalled or hostile. */
export const SLOW_CLIENT_TIMEOUTS: SlowClientTimeouts = { headersMs: 10_000, requestMs: 15_000, checkIntervalMs: 1_000 }

/**
 * Fastify's own validator factory, made once for every app this process builds rather than once per app: its Ajv
 * is then shared, and compiles each route schema once (a warm build 102-113 ms of CPU, 65-74 ms with it; a process's
 * first 446-488 ms, 268-376 ms). The tests, which build about 260 apps, feel it most.
 */
const VALIDATORS = ValidatorSelector()
const SERIALIZERS = sharedSerializers()

/** Builds the whole service without listening: `server.ts` listens, tests `inject`. */
export async function buildApp ({
  config, logger, now = steadyNow, loadShedding: sheddingOptions = {}, slowClients = SLOW_CLIENT_TIMEOUTS, upstreamSocketPath
}: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    // No Host on an HTTP/1.1 request is refused by plugins/http-edges.ts, with the contract's body rather than node:http's empty one.
    http: { headersTimeout: slowClients.headersMs, connectionsCheckingInterval: slowClients.checkIntervalMs, requireHostHeader: false },
    requestTimeout: slowClients.requestMs,
    ...(isLoggerInstance(logger) ? { loggerInstance: logger } : { logger: logger ?? loggerOptions(config.LOG_LEVEL, tracingConfigured(config)) }),
    logController: new OneLinePerRequest(),
    genReqId: requestId,
    // While closing, requests already on an open connection are still served (with Connection: close)
    // rather than refused with a body outside the contract; /readyz answers 503 meanwhile.
    return503OnClosing: false,
    // No parameter of an accepted request line is longer: any username in one reaches its route's schema.
    routerOptions: { maxParamLength: MAX_REQUEST_LINE_OCTETS, ignoreTrailingSlash: false },
    trustProxy: config.TRUST_PROXY,
    // A malformed URL (bad percent-encoding) is answered before any route, hence before the error handler and the hooks.
    frameworkErrors: (error, request, reply) => { app.answerFrameworkError(error, request, reply) },
    // A request node:http's parser refuses (malformed, headers too large, too slow) reaches no hook at all.
    clientErrorHandler: (error, socket) => { app.answerClientError(error, socket) },
    schemaController: { compilersFactory: { buildValidator: VALIDATORS, buildSerializer: SERIALIZERS } }
  }).withTypeProvider<TypeBoxTypeProvider>()
  answerHalfClosedRequests(app.server)

  await app.register(configPlugin, { config })
  // First: its server span is the parent of everything a request causes, and its hooks must see every route.
  await app.register(tracing)
  await app.register(routeConfig)
  await app.register(answerHeaders)
  await app.register(errorHandler, { now })
  await app.register(httpEdges)
  await app.register(telemetry)
  await app.register(gracefulClose)
  await app.register(redis, { now })
  await app.register(upstream, { now, ...(upstreamSocketPath !== undefined && { socketPath: upstreamSocketPath }) })
  await app.register(cache, { now })
  // Protection and docs before the routes: their onRoute hooks see only routes registered after them.
  await app.register(securityHeaders)
  await app.register(cors)
  await app.register(loadShedding, sheddingOptions)
  await app.register(rateLimit, { now })
  await app.register(docs)
  await app.register(metricsRoute)
  await app.register(healthRoutes)
  await app.register(profileRoutes)
  await app.register(adminRoutes)
  await app.ready()
  return app
}

function isLoggerInstance (logger: AppOptions['logger']): logger is FastifyServerOptions['loggerInstance'] {
  return typeof logger === 'object' && logger !== null && 'child' in logger && typeof logger.child === 'function'
}
