// The client, built by `npm run build -w client`, served next to this page (see examples/serve.ts).
import { createClient, parseProfile, ProfileBffError } from './client/index.js'

const api = new URLSearchParams(window.location.search).get('api') ?? 'http://127.0.0.1:3000'
const client = createClient({ baseUrl: api })
const show = (id, text) => { document.getElementById(id).textContent = String(text) }

async function main () {
  show('api', api)
  const first = await client.profile('alice')
  const profile = parseProfile(first.data.user)
  show('name', profile.name)
  show('age', profile.age)
  show('credits', profile.credits?.toLocaleString('en'))
  show('about', profile.about)
  show('x-cache', first.cache)
  show('server-timing', first.serverTiming)

  const again = await client.profile('alice')
  show('revalidation', `${again.status} ${again.cache}`)

  const batch = await client.profiles(['alice', 'bob', 'ghost-1'], { fields: ['name', 'credits'] })
  const list = document.getElementById('batch')
  for (const [username, { user }] of Object.entries(batch.data.profiles)) {
    const item = document.createElement('li')
    item.textContent = `${username}: ${user.name}, ${parseProfile(user).credits} credits`
    list.append(item)
  }
  for (const [username, error] of Object.entries(batch.data.errors)) {
    const item = document.createElement('li')
    item.textContent = `${username}: ${error.code}`
    list.append(item)
  }

  try {
    await client.profile('ghost-2')
  } catch (error) {
    if (!(error instanceof ProfileBffError)) throw error
    show('error', `${error.code} (${error.statusCode}), request ${error.requestId}`)
  }
}

main().then(
  () => { document.body.dataset.done = 'ok' },
  (error) => { show('failure', error); document.body.dataset.done = 'failed' }
)
