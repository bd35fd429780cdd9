import { Type, type Static } from '@sinclair/typebox'
import { INVALID_USERNAME } from '../errors.ts'
import { ErrorBody, memberErrors } from './error-docs.ts'
import { StringEnum } from './common.ts'
import { ANY_CASE, Profile, QUERY_VALUES } from './profile.ts'

/** Distinct usernames one batch may name. */
export const MAX_BATCH = 50

/** Query parameters whose values come comma-separated (the route also takes them repeated). */
export const COMMA_SEPARATED: ReadonlySet<string> = new Set(['fields'])

export const BatchQuery = Type.Object({
  username: Type.Optional(Type.Array(Type.String(), {
    description: `a member's username; repeat the parameter for each one (1 to ${MAX_BATCH} distinct; duplicates count once)`,
    examples: [['alice', 'bob']]
  })),
  fields: Type.Optional(Type.Array(StringEnum(QUERY_VALUES), {
    description: `keep only these keys in each \`user\`: \`query\` values of \`/user/:username\`, ${ANY_CASE}; ` +
      'comma-separated (`fields=name,age`) or repeated (`fields=name&fields=age`)',
    examples: [['name', 'credits']]
  }))
})
export type BatchQuery = Static<typeof BatchQuery>

export const BatchResponse = Type.Object({
  profiles: Type.Record(Type.String(), Type.Object({ user: Type.Partial(Profile) }), {
    description: 'by username: the profile, with only `fields` when given'
  }),
  errors: Type.Record(Type.String(), ErrorBody([new INVALID_USERNAME(), ...memberErrors].map((error) => error.code)), {
    description: 'by username: why it has no profile here (the error its own request would have answered)'
  })
}, {
  description: 'Every username named appears under exactly one of `profiles` or `errors`.',
  examples: [{
    profiles: { alice: { user: { name: 'Alice Moreau', Credits: '1.234.567' } } },
    errors: { 'ghost-1': { statusCode: 404, code: 'PROFILE_NOT_FOUND', error: 'Not Found', message: 'No profile for username ghost-1' } }
  }]
})
export type BatchResponse = Static<typeof BatchResponse>
