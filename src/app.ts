import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from './config.js'
import { errorResponse } from './error-response.js'
import configPlugin from './plugins/config.js'
import errorHandler from './plugins/error-handler.js'
import redis from './plugins/redis.js'
import telemetry from './plugins/telemetry.js'
import upstream from './plugins/upstream.js'
import cache from './plugins/cache.js'
import healthRoutes from './routes/health.js'
import profileRoutes from './routes/profiles.js'

export interface AppOptions {
  config: Config
  /** Pino options, or a logger instance; default: the config's LOG_LEVEL on stdout. */
  logger?: FastifyServerOptions['logger'] | FastifyServerOptions['loggerInstance']
}

/**
 * 128 code points, each up to 4 UTF-8 bytes written as 3 characters of percent-encoding: the router's
 * limit must let every valid username through, so the schema, not the router, answers a too long one.
 */
const MAX_USERNAME_URL_CHARS = 128 * 4 * 3

/** Builds the whole service without listening: `server.ts` listens, tests `inject`. */
export async function buildApp ({ config, logger }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(isLoggerInstance(logger) ? { loggerInstance: logger } : { logger: logger ?? { level: config.LOG_LEVEL } }),
    routerOptions: { maxParamLength: MAX_USERNAME_URL_CHARS, ignoreTrailingSlash: false },
    trustProxy: config.TRUST_PROXY,
    // A malformed URL (bad percent-encoding) is answered before any route, hence before the error handler.
    frameworkErrors: (error, _request, reply: FastifyReply) => {
      const body = errorResponse(error)
      reply.code(body.statusCode).header('cache-control', 'no-store').send(body)
    }
  }).withTypeProvider<TypeBoxTypeProvider>()

  await app.register(configPlugin, { config })
  await app.register(errorHandler)
  await app.register(telemetry)
  await app.register(redis)
  await app.register(upstream)
  await app.register(cache)
  await app.register(healthRoutes)
  await app.register(profileRoutes)
  await app.ready()
  return app
}

function isLoggerInstance (logger: AppOptions['logger']): logger is FastifyServerOptions['loggerInstance'] {
  return typeof logger === 'object' && logger !== null && 'child' in logger && typeof logger.child === 'function'
}
