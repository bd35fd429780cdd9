import type { SchemaErrorDataVar, SchemaErrorFormatter } from 'fastify/types/schema.js'

/** The coded error a route answers when one part of its request fails its schema. */
export type ValidationErrors = Partial<Record<SchemaErrorDataVar, () => Error>>

/**
 * A route's `schemaErrorFormatter`: each part the route declares fails with its own code; any other
 * part keeps Fastify's uncoded error, which the error handler answers as a plain 400.
 */
export function validationErrors (errors: ValidationErrors): SchemaErrorFormatter {
  return (failures, part) => {
    const coded = errors[part]
    if (coded !== undefined) return coded()
    const error = new Error(failures.map((failure) => `${part}${failure.instancePath} ${failure.message ?? 'is invalid'}`).join(', '))
    return Object.assign(error, { statusCode: 400 })
  }
}
