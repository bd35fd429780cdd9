import { readFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { extname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
/** URL prefix -> directory: the page, and the client as built by `npm run build -w client`. */
const MOUNTS: Array<[string, string]> = [['/client/', join(ROOT, 'client/dist')], ['/', join(ROOT, 'examples/browser')]]
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' }

/** Serves the example page on its own origin (not the API's), as a frontend would be. */
export async function serveExample (port = 0, host = '127.0.0.1'): Promise<{ server: Server, url: string }> {
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://x').pathname
    const [prefix, dir] = MOUNTS.find(([mount]) => path.startsWith(mount)) as [string, string]
    const file = normalize(join(dir, path.slice(prefix.length) || 'index.html'))
    if (!file.startsWith(dir) || TYPES[extname(file)] === undefined) return response.writeHead(404).end()
    readFile(file).then(
      (body) => response.writeHead(200, { 'content-type': TYPES[extname(file)] as string }).end(body),
      () => response.writeHead(404).end()
    )
  })
  await new Promise<void>((resolve) => server.listen(port, host, resolve))
  return { server, url: `http://${host}:${(server.address() as AddressInfo).port}` }
}

// `npm run example`: the page on :5173, calling the service (`npm run dev`) on :3000.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { url } = await serveExample(Number(process.env.EXAMPLE_PORT ?? 5173))
  process.stdout.write(`example page: ${url}/?api=http://127.0.0.1:${process.env.PORT ?? 3000}\n`)
}
