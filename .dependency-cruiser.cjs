/** Import rules for src/: checked by `npm run lint`. */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle hides which module is the lower layer.',
      from: {},
      to: { circular: true }
    },
    {
      name: 'logic-not-from-plugins',
      severity: 'error',
      comment: 'Plugins wire the logic into Fastify; the logic never depends on them.',
      from: { path: '^src/', pathNot: '^src/(plugins/|app\\.ts$|server\\.ts$)' },
      to: { path: '^src/plugins/' }
    }
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' }
  }
}
