// The array buffers JavaScript's L1 loads mapped words through (the stamp
// table, the tag tables, the epoch) are a read-only view of the files: a
// store into them while the cache is open never reaches another process
// (it faults), and a store after close() lands in the process's own memory
// and never kills it. The package keeps them off its classes.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, test } from 'node:test'
import { cacheName } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const native = require('../lib/native.cjs')
const OPEN = { size: '8MiB', ttl: 60, jitter: 0, loaderTimeout: 5, l1: true }

const names = []
after(() => {
  for (const n of names) {
    const c = new native.NativeCache(n, OPEN)
    c.unlink()
    c.close()
  }
})

/**
 * A child process that opens cache `name` with the addon alone, takes its
 * word buffers and this thread's blocks, and runs `body` (JavaScript with
 * `nc`, `words` and `blocks` in scope); its exit status, signal and output.
 */
function child(name, body) {
  const script = `
const native = require(${JSON.stringify(join(here, '..', 'lib', 'native.cjs'))})
const own = native.buffers
const nc = new native.NativeCache(process.argv[1], ${JSON.stringify(OPEN)})
const words = own ? own.words(nc) : nc.words()
const blocks = own
  ? [own.meta(), own.input(), own.clock()]
  : [native.NativeCache.meta(), native.NativeCache.input(), native.NativeCache.clock()]
const fill = (b) => {
  const a = new Uint32Array(b)
  for (let i = 0; i < a.length; i += 7) a[i] = 0xdeadbeef
  a[a.length - 1] = 0xdeadbeef
}
${body}
`
  return spawnSync(process.execPath, ['-e', script, name], { encoding: 'utf8', timeout: 30_000 })
}

for (const unlink of [false, true]) {
  test(`stores through every buffer after close()${unlink ? ' and unlink()' : ''} never kill the process`, () => {
    const name = cacheName('buf-closed')
    if (!unlink) names.push(name)
    const r = child(
      name,
      `
nc.store('k', 1, '"v"', undefined, undefined, undefined, undefined, ['t'])
${unlink ? 'nc.unlink()' : ''}
nc.close()
for (const b of [...words, ...blocks]) fill(b)
const stamps = new Uint32Array(words[0])
console.log(JSON.stringify({ n: words.length, first: stamps[0], again: nc.words ? nc.words() : own.words(nc) }))
`,
    )
    assert.equal(r.signal, null, `the child died of ${r.signal}: ${r.stderr}`)
    assert.equal(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout)
    assert.equal(out.n, 4)
    assert.equal(out.first, 0xdeadbeef, "the store landed in the child's own memory")
    assert.equal(out.again, null, 'a closed cache hands out no buffers')
  })
}

test('a store through the word buffers while the cache is open changes nothing another process sees', () => {
  const name = cacheName('buf-open')
  names.push(name)
  const nc = new native.NativeCache(name, OPEN)
  nc.store('k', 1, '"v"', undefined, undefined, undefined, undefined, ['t'])
  const words = native.buffers ? native.buffers.words(nc) : nc.words()
  assert.equal(words.length, 4)
  const snapshot = () => words.map((b) => createHash('sha256').update(new Uint8Array(b)).digest('hex'))
  const before = snapshot()
  const r = child(name, `for (const b of words) fill(b)\nconsole.log('stored')`)
  assert.deepEqual(snapshot(), before, "the other process's stores reached the shared words")
  assert.equal(r.signal, 'SIGSEGV', 'a store into the read-only view faults at once')
  assert.equal(r.stdout, '')
  nc.close()
})

test("the buffers are off the addon's class and exports, and given once per cache", () => {
  assert.equal('words' in native.NativeCache.prototype, false)
  for (const k of ['meta', 'input', 'clock']) assert.equal(k in native.NativeCache, false, k)
  for (const k of ['metaBuffer', 'inputBuffer', 'clockBuffer', 'buffers']) {
    assert.equal(Object.keys(native).includes(k), false, k)
  }
  const name = cacheName('buf-once')
  names.push(name)
  const nc = new native.NativeCache(name, OPEN)
  assert.equal(native.buffers.words(nc).length, 4)
  assert.equal(native.buffers.words(nc), null)
  nc.close()
  const none = new native.NativeCache(name, { ...OPEN, l1: false })
  assert.equal(native.buffers.words(none), null, 'a cache without L1 has no view')
  none.close()
})
