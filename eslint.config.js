import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['dist', 'client/dist', 'client/src/openapi.ts', 'node_modules', '.tap', 'coverage'] }),
  { rules: { '@stylistic/comma-dangle': ['error', 'never'] } },
  {
    // TypeBox's idiom: a schema and its static type share one name (`Profile` the value, `Profile` the type).
    files: ['src/schemas/**'],
    rules: { '@typescript-eslint/no-redeclare': 'off' }
  }
]
