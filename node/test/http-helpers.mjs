// Requests with exactly the lines a test gives (fetch adds its own), and
// servers the HTTP tests start: in this process, or as processes of either
// language (http-server.mjs, http-server.py).
import http from 'node:http'
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { python } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))

/** One request to 127.0.0.1:`port`: `{ status, headers, body }` (body a string). */
export function request(port, path, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers, agent: false }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** `handler` served in this process; `{ port, close }`. */
export async function serve(handler) {
  const server = http.createServer(handler)
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: server.address().port,
    close: () => new Promise((r) => server.close(r)),
  }
}

/**
 * A server process of `lang` ('node' or 'python') behind the HTTP cache on cache `name`:
 * `{ port, calls, pid, kill }`, `calls` the URLs its app was called for so far.
 */
export async function server(lang, name, delay = 0) {
  const child =
    lang === 'node'
      ? spawn(process.execPath, [join(here, 'http-server.mjs'), name, String(delay)], { stdio: ['ignore', 'pipe', 'inherit'] })
      : spawn(python(), [join(here, 'http-server.py'), name], { stdio: ['ignore', 'pipe', 'inherit'] })
  const calls = []
  let ready
  const port = new Promise((r) => (ready = r))
  createInterface({ input: child.stdout }).on('line', (l) => {
    const m = JSON.parse(l)
    if (m.port) ready(m.port)
    else calls.push(m.call)
  })
  const exited = new Promise((r) => child.on('exit', r))
  return {
    port: await port,
    calls,
    pid: child.pid,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      await exited
    },
  }
}
