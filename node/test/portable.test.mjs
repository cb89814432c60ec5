// Off Linux the package loads the addon built for WebAssembly (wasm/ in a checkout,
// ziggurat-wasm32-wasi when installed): the rules run as on Linux, and a cache opens
// degraded, caching in its process ('local') unless the app chose a mode, with one
// warning saying why. NAPI_RS_FORCE_WASI=1 loads that build here, as it would be loaded
// on macOS or Windows, and each check runs in a child process of its own.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * Runs `body` (an async function's source, with `Cache`, `HttpCache`, `native`
 * and `out(value)` in scope) in a child, with the WebAssembly build when `wasm`:
 * { out, warnings (every process warning, by name and message), status }.
 */
function child(body, { wasm = true } = {}) {
  const src = `
    const warnings = []
    process.on('warning', (w) => warnings.push({ name: w.name, message: w.message }))
    const { Cache } = require('./cache.cjs')
    const { HttpCache } = require('./http.cjs')
    const native = require('./lib/native.cjs')
    const results = []
    const out = (v) => results.push(v)
    ;(async () => { ${body} })().then(
      () => setImmediate(() => console.log(JSON.stringify({ results, warnings }))),
      (e) => { console.error(e); process.exit(3) },
    )`
  const env = { ...process.env, NAPI_RS_FORCE_WASI: wasm ? '1' : '' }
  const r = spawnSync(process.execPath, ['-e', src], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 })
  assert.equal(r.status, 0, r.stderr)
  const { results, warnings } = JSON.parse(r.stdout.trim().split('\n').pop())
  return { out: results, warnings }
}

const built = existsSync(join(ROOT, 'wasm', 'ziggurat.wasm32-wasi.wasm'))
const skip = built ? false : 'the WebAssembly build is missing: npm run build:wasm'

test('a cache off Linux runs in its process, with one warning that says why', { skip }, () => {
  const { out, warnings } = child(`
    const c = new Cache('portable-local')
    out([c.degraded, c.degradedCause])
    c.set('post:1', { title: 'Hello' }, { ttl: 60 })
    out(c.get('post:1'))
    let calls = 0
    const load = () => new Promise((r) => setTimeout(() => r(++calls), 20))
    out(await Promise.all([c.getOrSet('k', load), c.getOrSet('k', load)]))
    out(native.NativeCache === undefined)
  `)
  assert.deepEqual(out[0], [true, 'unsupported_platform'])
  assert.deepEqual(out[1], { title: 'Hello' })
  assert.deepEqual(out[2], [1, 1], 'two callers of one key in the process load it once')
  assert.equal(out[3], false)
  assert.equal(warnings.length, 1, JSON.stringify(warnings))
  assert.equal(warnings[0].name, 'ZigguratWarning')
  assert.match(warnings[0].message, /needs Linux/)
  assert.match(warnings[0].message, /degraded: 'local': each process caches alone/)
})

test("a mode the app chose holds off Linux: 'raise' throws, 'passthrough' caches nothing", { skip }, () => {
  const { out, warnings } = child(`
    try {
      new Cache('portable-raise', { degraded: 'raise' })
      out('opened')
    } catch (e) {
      out([e.name, e.code, /needs Linux/.test(e.message)])
    }
    const c = new Cache('portable-pass', { degraded: 'passthrough' })
    c.set('a', 1)
    out(c.get('a') === undefined)
  `)
  assert.deepEqual(out[0], ['SegmentError', 'unsupported_platform', true])
  assert.equal(out[1], true)
  assert.equal(warnings.length, 1, JSON.stringify(warnings))
})

test('the rules off Linux are the addon\'s own: the same refusals, word for word', { skip }, () => {
  const body = `
    // Both builds degrade here (a missing directory on Linux), and open no segment.
    const o = { degraded: 'local', directory: '/nonexistent-ziggurat-dir' }
    const tries = [
      () => new Cache('p', { size: 100 }),
      () => new Cache('p', { ttl: -1 }),
      () => new Cache('p', { copy: 'deep' }),
      () => new Cache('bad/name'),
      () => new Cache('p', o).set('', 1),
      () => new Cache('p', o).get('x'.repeat(5000)),
      () => new HttpCache(new Cache('p', o), { ttl: 'soon' }),
      () => new HttpCache(new Cache('p', o), { purgeToken: 'short' }),
    ]
    for (const t of tries) {
      try {
        t()
        out(null)
      } catch (e) {
        out([e.name, e.message])
      }
    }
  `
  const portable = child(body).out
  const linux = child(body, { wasm: false }).out
  assert.equal(portable.filter((r) => r === null).length, 0, JSON.stringify(portable))
  assert.deepEqual(portable, linux)
})

test('the HTTP response cache off Linux answers from the process\'s own store', { skip }, () => {
  const { out } = child(`
    const http = require('node:http')
    const cache = new Cache('portable-http')
    let calls = 0
    const app = (req, res) => {
      calls++
      res.setHeader('cache-control', 'public, max-age=60')
      res.end('page ' + calls)
    }
    const server = http.createServer(new HttpCache(cache).handler(app)).listen(0, '127.0.0.1')
    await new Promise((r) => server.once('listening', r))
    const url = 'http://127.0.0.1:' + server.address().port + '/a'
    const first = await (await fetch(url)).text()
    const second = await (await fetch(url)).text()
    server.close()
    out([first, second, calls])
  `)
  assert.deepEqual(out[0], ['page 1', 'page 1', 1])
})
