/**
 * Import rules for src/, checked by `npm run lint`. The layers, from the top:
 *   app.ts, server.ts → plugins/ → routes/ → http/ → lookups/ → cache/ → redis/;  upstream/ → redis/;
 *   plugins/ → rate-limit/ → redis/;  plugins/tracing.ts → tracing/ (the OpenTelemetry SDK, imported only when tracing is on)
 * and below them all the shared vocabulary (config, errors, resources, schemas, telemetry, logging,
 * load-budget, cancellation), which imports none of the layers. A module imports its own
 * layer and those below it, never one above.
 */
const BASE = '^src/(config|config-formats|errors|resources|load-budget|cancellation|v8-flags)\\.ts$|^src/(schemas|telemetry|logging)/'

/** `layer` may not import any of `above`. */
const below = (name, layer, above, comment) => ({
  name,
  severity: 'error',
  comment,
  from: { path: layer },
  to: { path: above }
})

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle hides which module is the lower layer.',
      from: {},
      to: { circular: true }
    },
    below('plugins-only-from-the-app', '^src/(?!plugins/|app\\.ts$|server\\.ts$)', '^src/plugins/',
      'Plugins wire the logic into Fastify; the logic never depends on them.'),
    below('routes-only-from-the-app', '^src/(?!routes/|plugins/|app\\.ts$)', '^src/routes/',
      'Routes are registered by the app; nothing below them knows of them.'),
    below('http-only-from-routes-and-plugins', '^src/(?!http/|routes/|plugins/|app\\.ts$|server\\.ts$)', '^src/http/',
      'HTTP helpers serve the routes and plugins; the logic below never speaks HTTP.'),
    below('lookups-below-routes', '^src/(cache|redis|upstream)/|' + BASE, '^src/lookups/',
      'The lookups call the cache and the upstream, never the other way round.'),
    below('cache-above-redis-only', '^src/(redis|upstream)/|' + BASE, '^src/cache/',
      'The cache stands on Redis (its driver, bus and locks); Redis and the upstream know nothing of it.'),
    below('upstream-above-redis-only', '^src/(cache|redis)/|' + BASE, '^src/upstream/',
      'The upstream edge stands on Redis (the shared token and back-off); the cache reaches it through the lookups.'),
    below('rate-limit-above-redis-only', '^src/(lookups|cache|redis|upstream)/|' + BASE, '^src/rate-limit/',
      'The rate limit stands on Redis (its shared counts); its plugin wires it, and nothing below knows of it.'),
    below('redis-at-the-bottom', BASE, '^src/redis/',
      'Redis is the lowest layer but the shared vocabulary.'),
    below('tracing-sdk-only-from-its-plugin', '^src/(?!tracing/|plugins/tracing\\.ts$)', '^src/tracing/',
      'The OpenTelemetry SDK is loaded by plugins/tracing.ts alone, and only when tracing is on; the logic makes its spans through the API (telemetry/tracing.ts).'),
    {
      name: 'shared-vocabulary-imports-no-layer',
      severity: 'error',
      comment: 'Config, errors, schemas, telemetry and the like are imported by every layer, so they import none.',
      from: { path: BASE },
      to: { path: '^src/(plugins|routes|http|lookups|cache|upstream|redis|rate-limit)/' }
    }
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' }
  }
}
