import helmet from '@fastify/helmet'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/**
 * Helmet's headers, tuned for a JSON API read by browsers on other origins: a content security policy
 * that allows nothing (a JSON body is never a document to run; /docs sets its own, see plugins/docs.ts),
 * no framing, and a cross-origin resource policy that lets other origins read us (CORS decides who).
 */
async function securityHeaders (app: FastifyInstance): Promise<void> {
  await app.register(helmet, {
    contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
    crossOriginResourcePolicy: { policy: 'cross-origin' },
    frameguard: { action: 'deny' }
  })
}

export default fp(securityHeaders, { name: 'security-headers' })
