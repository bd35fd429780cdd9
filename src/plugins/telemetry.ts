import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { noTelemetry, type Telemetry } from '../telemetry.js'

declare module 'fastify' {
  interface FastifyInstance {
    telemetry: Telemetry
  }
}

/** Where the logic classes report what operators watch (see src/telemetry.ts). */
async function telemetry (app: FastifyInstance): Promise<void> {
  app.decorate('telemetry', noTelemetry)
}

export default fp(telemetry, { name: 'telemetry' })
