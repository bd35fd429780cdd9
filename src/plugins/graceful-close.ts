import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    /** True from the moment the app starts closing (SIGTERM): /readyz answers 503, connections are not kept. */
    readonly closing: boolean
    /** Starts closing before `close()`: requests are still accepted and served, but /readyz answers 503. */
    beginClosing: () => void
  }
}

/**
 * Lets a close finish as soon as the requests in flight do. Closing the server only stops new
 * connections and drops the idle ones; a keep-alive connection whose request is still running would
 * stay open, once answered, until its idle timeout. So every answer sent while closing says
 * `Connection: close`, and its connection ends with it.
 */
async function gracefulClose (app: FastifyInstance): Promise<void> {
  let closing = false
  app.decorate('closing', { getter: () => closing })
  app.decorate('beginClosing', () => { closing = true })
  app.addHook('preClose', async () => { closing = true })
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close')
    done(null, payload)
  })
}

export default fp(gracefulClose, { name: 'graceful-close' })
