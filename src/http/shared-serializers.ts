import SerializerSelector, { type SerializerFactory, type Serializer } from '@fastify/fast-json-stringify-compiler'

/**
 * Fastify's serializer factory, shared by every app a process builds: each response schema is compiled once for the
 * process rather than once per app. These compilations were a fifth of an app's start-up CPU, and the tests build a
 * few hundred apps. A compilation depends on the schema, the shared schemas and the options alone, so their JSON keys
 * it (the routes build their schemas per app: equal, not the same objects).
 */
export function sharedSerializers (): SerializerFactory {
  const build = SerializerSelector()
  const compiled = new Map<string, Serializer>()
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options)
    const setting = JSON.stringify([externalSchemas, options])
    return (route) => {
      const key = `${setting}${JSON.stringify(route.schema)}`
      let serializer = compiled.get(key)
      if (serializer === undefined) {
        serializer = compile(route)
        compiled.set(key, serializer)
      }
      return serializer
    }
  }
}
