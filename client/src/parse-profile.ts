import type { ProfileUser } from './bodies.ts'

/** A profile with the documented text formats read: numbers as numbers, text trimmed; `null` where a value does not parse. */
export interface ParsedProfile {
  name: string | null
  /** `" 34 years "` -> 34 */
  age: number | null
  gender: string | null
  location: string | null
  /** `"382.693"` (dots as thousands separators) -> 382693 */
  credits: number | null
  rank: string | null
  videos: number | null
  photos: number | null
  /** `"Member since 3 years ago"`, trimmed */
  joined: string | null
  about: string | null
}

const AGE = /^(\d{1,3}) years?$/
const DOTTED_THOUSANDS = /^\d{1,3}(?:\.\d{3})*$/
const COUNT = /^\d+$/

/** Reads the upstream's text formats; anything that does not match its documented form is `null`, never a guess. */
export function parseProfile (user: Partial<ProfileUser>): ParsedProfile {
  return {
    name: text(user.name),
    age: number(user.age, AGE, (value) => AGE.exec(value)?.[1] ?? ''),
    gender: text(user.gender),
    location: text(user.location),
    credits: number(user.Credits, DOTTED_THOUSANDS, (value) => value.replaceAll('.', '')),
    rank: text(user.rank),
    videos: number(user.videos, COUNT, (value) => value),
    photos: number(user.photos, COUNT, (value) => value),
    joined: text(user.joined),
    about: text(user.about)
  }
}

function text (value: string | undefined): string | null {
  const trimmed = value?.trim()
  return trimmed === undefined || trimmed === '' ? null : trimmed
}

function number (value: string | undefined, form: RegExp, digits: (value: string) => string): number | null {
  const trimmed = value?.trim()
  if (trimmed === undefined || !form.test(trimmed)) return null
  const parsed = Number(digits(trimmed))
  return Number.isSafeInteger(parsed) ? parsed : null
}
