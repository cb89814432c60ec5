// The Node.js examples of docs/node.md and of the README run, each twice in a fresh
// process on one private directory (the cache outlives the process: a second run meets
// what the first left, as a restarted worker does), and the make targets they name exist.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { createInterface } from 'node:readline'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { test } from 'node:test'
import { redisServer } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const pages = ['docs/node.md', 'README.md'].map((p) => readFileSync(join(root, p), 'utf8'))

function blocks(lang) {
  const out = []
  const re = new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm')
  for (const page of pages) for (const m of page.matchAll(re)) out.push(m[1])
  return out
}

/** A Redis server for the examples of the cluster tier (REDIS_URL), stopped by `t.after`. */
async function redisFor(t) {
  const s = createServer()
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  await once(s, 'close')
  const dir = mkdtempSync('/tmp/zignodedocs-redis-')
  const redis = spawn(redisServer(), ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  t.after(() => {
    redis.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  for await (const line of createInterface({ input: redis.stdout })) {
    if (/Ready to accept connections/.test(line)) break
  }
  return `redis://127.0.0.1:${port}/0`
}

test('every js example of docs/node.md and the README runs, twice', async (t) => {
  const examples = blocks('js')
  assert.ok(examples.length >= 4)
  const env = { ...process.env, REDIS_URL: await redisFor(t), CACHE_SECRET: 'a-secret-for-the-examples' }
  for (const [i, code] of examples.entries()) {
    const dir = mkdtempSync('/dev/shm/zignodedocs-')
    try {
      // The example's caches live in the private directory: `ziggurat` is a shim that
      // gives every Cache that directory.
      const shim = join(dir, 'shim.mjs')
      const real = pathToFileURL(join(root, 'node', 'index.js')).href
      writeFileSync(
        shim,
        `import * as z from ${JSON.stringify(real)}\n` +
          `export class Cache extends z.Cache {\n` +
          `  constructor(name, options) { super(name, { directory: ${JSON.stringify(dir)}, ...options }) }\n` +
          `}\n`,
      )
      const file = join(dir, `example${i}.mjs`)
      const http = pathToFileURL(join(root, 'node', 'http.js')).href
      const source = code
        .replaceAll("from 'ziggurat'", `from ${JSON.stringify(pathToFileURL(shim).href)}`)
        .replaceAll("from 'ziggurat/http'", `from ${JSON.stringify(http)}`)
      writeFileSync(file, source)
      for (const run of ['first', 'second']) {
        const r = spawnSync(process.execPath, [file], { encoding: 'utf8', cwd: dir, env })
        assert.equal(r.status, 0, `example ${i}, ${run} run:\n${code}\n${r.stdout}${r.stderr}`)
        assert.doesNotMatch(r.stderr, /Assertion failed/, `example ${i}, ${run} run:\n${code}`)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
})

test('the make targets docs/node.md names exist', () => {
  const makefile = readFileSync(join(root, 'Makefile'), 'utf8')
  const targets = new Set([...makefile.matchAll(/^([a-z][a-z-]*):/gm)].map((m) => m[1]))
  const named = blocks('sh').flatMap((b) => [...b.matchAll(/^make ([a-z-]+)/gm)].map((m) => m[1]))
  assert.ok(named.length >= 2)
  for (const t of named) assert.ok(targets.has(t), `make ${t}`)
})
