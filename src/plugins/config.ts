import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.ts'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
  }
}

/** Makes the already validated configuration reachable as `app.config`. */
export default fp(async (app: FastifyInstance, { config }: { config: Config }) => {
  app.decorate('config', config)
}, { name: 'config' })
