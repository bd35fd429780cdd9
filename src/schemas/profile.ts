import { Type, type Static, type TString } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { StringEnum } from './common.ts'

/** The ten profile fields, spelled as the upstream spells them in bodies. */
export const PROFILE_FIELDS = ['name', 'age', 'gender', 'location', 'Credits', 'rank', 'videos', 'photos', 'joined', 'about'] as const
export type ProfileField = typeof PROFILE_FIELDS[number]

/** `?query=` values (lower case) to body keys: `credits` answers `Credits`. */
export const FIELD_BY_QUERY: ReadonlyMap<string, ProfileField> = new Map(PROFILE_FIELDS.map((field) => [field.toLowerCase(), field]))
export const QUERY_VALUES = [...FIELD_BY_QUERY.keys()] as ReadonlyArray<Lowercase<ProfileField>>

const example: Record<ProfileField, string> = {
  name: 'Alice Moreau',
  age: ' 34 years ',
  gender: 'female',
  location: 'Göteborg, Sverige',
  Credits: '1.234.567',
  rank: 'Gold',
  videos: '12',
  photos: '348',
  joined: 'Member since 3 years ago',
  about: '  Coffee ☕ and mountains 🏔️   '
}

export const Profile = Type.Object(
  Object.fromEntries(PROFILE_FIELDS.map((field) => [field, Type.String()])) as Record<ProfileField, TString>,
  { additionalProperties: false, examples: [example] }
)
export type Profile = Static<typeof Profile>

export const ProfileResponse = Type.Object({ user: Profile }, { $id: 'ProfileResponse' })
export type ProfileResponse = Static<typeof ProfileResponse>

export const TimelineResponse = Type.Object({
  posts: Type.Array(Type.String(), {
    examples: [['Alice Moreau   2 hours ago  Sunrise over the fjord   14 people like this   Bob: wow  1 hour ago']]
  })
}, { $id: 'TimelineResponse' })
export type TimelineResponse = Static<typeof TimelineResponse>

/** How `query` and `fields` are described: the enum shows the lower-case values, the routes lower-case what they are given. */
export const ANY_CASE = 'matched case-insensitively (`credits`, `Credits` and `CREDITS` are all accepted)'

/**
 * An enum of the ten lower-case `query` values (a generated client gets their union); the route lower-cases
 * the value before the schema checks it, so any case is accepted.
 */
export const FieldQuery = Type.Object({
  query: StringEnum(QUERY_VALUES, { description: `the field to return, ${ANY_CASE}` })
})
export type FieldQuery = Static<typeof FieldQuery>

export const FieldResponse = Type.Object(
  Object.fromEntries(PROFILE_FIELDS.map((field) => [field, Type.Optional(Type.String())])),
  { minProperties: 1, maxProperties: 1, examples: [{ Credits: '1.234.567' }], description: 'exactly one key: the field asked for' }
)

/**
 * What we accept from the upstream. A field that is missing or null becomes "" (frontends rely on ten
 * strings, and one absent field should not hide the other nine); any other non-string, or a body
 * without `user`, is an invalid response and never cached. Unknown fields are dropped.
 */
const LenientField = Type.Optional(Type.Union([Type.String(), Type.Null()]))
const UpstreamProfileBody = Type.Object({
  user: Type.Object(Object.fromEntries(PROFILE_FIELDS.map((field) => [field, LenientField])))
})
const upstreamProfileCheck = TypeCompiler.Compile(UpstreamProfileBody)
const timelineCheck = TypeCompiler.Compile(TimelineResponse)

export function readUpstreamProfile (body: unknown): ProfileResponse | undefined {
  if (!upstreamProfileCheck.Check(body)) return undefined
  const user = Object.fromEntries(PROFILE_FIELDS.map((field) => [field, body.user[field] ?? ''])) as Profile
  return { user }
}

export function readUpstreamTimeline (body: unknown): TimelineResponse | undefined {
  return timelineCheck.Check(body) ? { posts: body.posts } : undefined
}
