import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'
import t from 'tap'
import { profileOf } from '../../dev/profiles.ts'
import { serveExample } from '../../examples/serve.ts'
import { stack } from '../helper.ts'
import { skipWithout } from '../helpers/required-tool.ts'

const CHROMIUM = '/usr/bin/chromium'
/** Both tests drive this browser: without it they say so and skip (`npm test` on a machine as it comes). */
const needsChromium = { skip: skipWithout(existsSync(CHROMIUM), `${CHROMIUM} is missing (Debian package chromium)`) }
const CLIENT_BUILD = new URL('../../client/dist/index.js', import.meta.url)

/**
 * Names the browser resolves to this machine: the page and the API on different origins, neither of
 * them loopback by name, so the browser treats them as any plain-HTTP site (upgrade-insecure-requests
 * would apply, for one).
 */
const HOSTS = '--host-resolver-rules=MAP *.example 127.0.0.1'

let shared: Promise<BrowserContext> | undefined

/** One Chromium for the file (starting one is most of this test's time), with a fresh profile, closed at the end. */
async function browser (): Promise<BrowserContext> {
  shared ??= launch()
  return await shared
}

async function launch (): Promise<BrowserContext> {
  if (!existsSync(CLIENT_BUILD)) throw new Error('client/dist is missing: npm run build -w client (npm test does)')
  const profile = mkdtempSync(join(tmpdir(), 'pbff-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', HOSTS]
  })
  t.teardown(async () => {
    await context.close()
    rmSync(profile, { recursive: true, force: true })
  })
  return context
}

t.test('the example page, on another origin, shows a profile and a batch through the client', needsChromium, async (t) => {
  const { app, sim } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const apiPort = (app.server.address() as AddressInfo).port
  const example = await serveExample()
  t.teardown(() => example.server.close())
  const examplePort = new URL(example.url).port
  const context = await browser()
  const page = await context.newPage()
  await page.goto(`http://app.example:${examplePort}/?api=http://api.example:${apiPort}`)
  await page.waitForSelector('body[data-done]', { timeout: 10_000 })
  const text = async (id: string): Promise<string> => await page.locator(`#${id}`).innerText()
  t.equal(await text('failure'), '')
  t.equal(await page.getAttribute('body', 'data-done'), 'ok')
  const alice = profileOf('alice')
  t.equal(await text('name'), alice.name)
  t.equal(await text('age'), String(Number.parseInt(alice.age?.trim() ?? '', 10)))
  t.equal(await text('credits'), Number(alice.Credits?.replaceAll('.', '')).toLocaleString('en'))
  t.equal(await text('x-cache'), 'MISS', 'X-Cache readable across origins')
  t.match(await text('server-timing'), /^cache;desc=MISS, upstream;dur=\d+/, 'Server-Timing readable across origins')
  t.equal(await text('revalidation'), '304 HIT', 'asked again with If-None-Match: 304')
  t.same(await page.locator('#batch li').allInnerTexts(), [
    `alice: ${alice.name}, ${Number(alice.Credits?.replaceAll('.', ''))} credits`,
    `bob: ${profileOf('bob').name}, ${Number(profileOf('bob').Credits?.replaceAll('.', ''))} credits`,
    'ghost-1: PROFILE_NOT_FOUND'
  ])
  t.match(await text('error'), /^PROFILE_NOT_FOUND \(404\), request \S+$/)
  t.equal(sim.callsFor('profile', 'alice'), 1, 'the revalidation and the batch were served from the cache')
})

t.test('/docs renders over plain HTTP on a non-loopback name, offers the ten query values, and Try it out answers 200', needsChromium, async (t) => {
  const { app } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as AddressInfo).port
  const context = await browser()
  const page = await context.newPage()
  await page.goto(`http://docs.example:${port}/docs`)
  const operation = page.locator('#operations-profiles-getField')
  await operation.locator('.opblock-summary').click({ timeout: 10_000 })
  await operation.locator('.try-out__btn').click()
  const query = operation.locator('tr[data-param-name="query"] select')
  const offered = (await query.locator('option').allInnerTexts()).filter((value) => value !== '--')
  t.same(offered, ['name', 'age', 'gender', 'location', 'credits', 'rank', 'videos', 'photos', 'joined', 'about'])
  await operation.locator('tr[data-param-name="username"] input').fill('alice')
  await query.selectOption('credits')
  await operation.locator('.execute').click()
  const status = operation.locator('.live-responses-table .response .response-col_status').first()
  await status.waitFor({ timeout: 10_000 })
  t.equal((await status.innerText()).trim(), '200')
  t.match(await operation.locator('.live-responses-table .microlight').first().innerText(), new RegExp(`"Credits": "${profileOf('alice').Credits}"`))
})
