import { Type, type Static } from '@sinclair/typebox'
import { INVALID_USERNAME } from '../errors.ts'
import { ErrorBody, memberErrors } from './error-docs.ts'
import { FIELD_NAME_PATTERN, Profile } from './profile.ts'

/** Distinct usernames one batch may name. */
export const MAX_BATCH = 50

export const BatchQuery = Type.Object({
  username: Type.Optional(Type.Array(Type.String(), {
    description: `a member's username; repeat the parameter for each one (1 to ${MAX_BATCH} distinct; duplicates count once)`,
    examples: [['alice', 'bob']]
  })),
  fields: Type.Optional(Type.Array(Type.String({ pattern: `^ *${FIELD_NAME_PATTERN} *(?:, *${FIELD_NAME_PATTERN} *)*$` }), {
    description: 'keep only these keys in each `user`: `query` values of `/user/:username`, case-insensitive, ' +
      'repeated (`fields=name&fields=age`) or comma-separated (`fields=name,age`)',
    examples: [['name', 'Credits']]
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
