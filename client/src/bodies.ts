import type { DataOperation } from './errors.ts'
import type { operations } from './openapi.ts'

type Body<O extends DataOperation> = operations[O]['responses'][200]['content']['application/json']

export type ProfileBody = Body<'getProfile'>
export type ProfileUser = ProfileBody['user']
export type TimelineBody = Body<'getTimeline'>
export type FieldBody = Body<'getField'>
export type BatchBody = Body<'getProfiles'>
/** A `query` value of the field route (also a `fields` value of the batch): one of the ten fields, lower case (the service takes any case). */
export type FieldQuery = operations['getField']['parameters']['query']['query']
