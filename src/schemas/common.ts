import { STATUS_CODES } from 'node:http'
import { Type, type Static, type TUnsafe, type SchemaOptions } from '@sinclair/typebox'

export const ErrorResponse = Type.Object({
  statusCode: Type.Integer({ examples: [404] }),
  code: Type.String({ examples: ['PROFILE_NOT_FOUND'] }),
  error: Type.String({ examples: ['Not Found'] }),
  message: Type.String({ examples: ['No profile for username ghost'] })
}, { $id: 'ErrorResponse', description: 'Every error the service answers' })
export type ErrorResponse = Static<typeof ErrorResponse>

/** An error as created by src/errors.ts: its code and status travel with it. */
export interface CodedError {
  code: string
  statusCode?: number
  message: string
}

/** A coded error's body, `error` being its status's HTTP reason. */
export function errorBody ({ statusCode = 500, code, message }: CodedError): ErrorResponse {
  return { statusCode, code, error: STATUS_CODES[statusCode] ?? 'Error', message }
}

/**
 * 1 to 128 code points (ajv matches patterns with the `u` flag), not `.` or `..`, no C0 control
 * character nor DEL. Anything else, `/` and `%` included, is a valid username that travels
 * percent-encoded to the upstream.
 */
const USERNAME_PATTERN = '^(?!\\.{1,2}$)[^\\u0000-\\u001f\\u007f]{1,128}$'
const USERNAME = new RegExp(USERNAME_PATTERN, 'u')

/** The routes' check (ajv's, u flag included: code points, where TypeBox's compiler counts UTF-16 units), for a batch's members. */
export function isUsername (value: string): boolean {
  return USERNAME.test(value)
}

const Username = Type.String({
  pattern: USERNAME_PATTERN,
  description: 'the member\'s username (1 to 128 characters)',
  examples: ['alice']
})

export const UsernameParams = Type.Object({ username: Username })
export type UsernameParams = Static<typeof UsernameParams>

/**
 * A string from a fixed list, as a JSON Schema `enum`: a union of literals would be `anyOf`, which
 * documentation UIs and client generators render as a free string.
 */
export function StringEnum<T extends string> (values: readonly T[], options: SchemaOptions = {}): TUnsafe<T> {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...options })
}
