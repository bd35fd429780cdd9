import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { stack } from '../../helper.ts'

const apps = new Map<string, Promise<FastifyInstance>>()

/**
 * An app in front of a simulator of its own, for the tests that only ask it something (its document, its probes,
 * an error body), which would cost less than building an app each: one per configuration, shared by these modules'
 * tests and closed when they have all ended.
 */
export async function sharedApp (env: Record<string, string> = {}): Promise<FastifyInstance> {
  const key = JSON.stringify(env)
  const once = apps.get(key) ?? stack(t, { env }).then(({ app }) => app)
  apps.set(key, once)
  return await once
}
