import { writeFileSync } from 'node:fs'
import { clientTypesSource, CLIENT_TYPES_FILE } from './client-types.ts'

// `npm run client:types`: rewrites the client's types from the live OpenAPI document.
writeFileSync(CLIENT_TYPES_FILE, await clientTypesSource())
process.stdout.write(`written ${CLIENT_TYPES_FILE.pathname}\n`)
