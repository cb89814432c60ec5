// The Keyv store adapter with the real keyv and cache-manager packages: Keyv's store
// contract (TTL in milliseconds, namespaces, the *Many calls), and two processes that see
// each other's writes through it.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { createCache } from 'cache-manager'
import Keyv from 'keyv'
import { Cache } from 'ziggurat'
import { KeyvZiggurat } from 'ziggurat/keyv'
import { cacheName, removedAfter } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const names = removedAfter()

function name(what) {
  const n = cacheName(what)
  names.push(n)
  return n
}

/** Runs an ES module in another process of this package (so it resolves keyv and ziggurat). */
function child(code) {
  return execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: here, encoding: 'utf8' })
}

test('Keyv over ziggurat: get, set with a TTL in ms, has, delete, the *Many calls', async () => {
  const store = new KeyvZiggurat(name('keyv'), { size: '8MiB' })
  const keyv = new Keyv({ store })
  assert.equal(store.namespace, 'keyv')
  assert.equal(await keyv.set('a', { x: 1 }), true)
  assert.deepEqual(await keyv.get('a'), { x: 1 })
  assert.equal(await keyv.has('a'), true)
  // Keyv prefixes the key with its namespace; the value is Keyv's serialized record.
  assert.equal(typeof store.cache.get('keyv:a'), 'string')
  await keyv.set('b', 'two')
  assert.deepEqual(await keyv.get(['a', 'b', 'c']), [{ x: 1 }, 'two', undefined])
  assert.equal(await keyv.delete('a'), true)
  assert.equal(await keyv.delete('a'), false)
  assert.equal(await keyv.get('a'), undefined)
  await keyv.set('c', 3)
  assert.equal(await keyv.deleteMany(['b', 'c']), true)
  assert.deepEqual(await keyv.get(['b', 'c']), [undefined, undefined])
  // The TTL reaches the cache itself: the entry is gone from the segment, not only from Keyv's view.
  await keyv.set('short', 1, 400)
  assert.equal(typeof store.cache.get('keyv:short'), 'string')
  await new Promise((r) => setTimeout(r, 1000))
  assert.equal(store.cache.get('keyv:short'), undefined)
  await keyv.disconnect()
  assert.throws(() => store.cache.get('x'), /is closed/)
})

test("clear() voids its namespace's entries alone", async () => {
  const cache = new Cache(name('keyv-ns'), { size: '8MiB' })
  const users = new Keyv({ store: new KeyvZiggurat(cache), namespace: 'users' })
  const posts = new Keyv({ store: new KeyvZiggurat(cache), namespace: 'posts' })
  await users.set('1', 'ada')
  await posts.set('1', 'hello')
  cache.set('plain', 'kept')
  await users.clear()
  assert.equal(await users.get('1'), undefined)
  assert.equal(await posts.get('1'), 'hello')
  assert.equal(cache.get('plain'), 'kept')
  cache.close()
})

test('two processes see each other’s writes through Keyv', async () => {
  const n = name('keyv-procs')
  const keyv = new Keyv({ store: new KeyvZiggurat(n, { size: '8MiB' }) })
  await keyv.set('from-parent', { pid: process.pid })
  const out = child(`import Keyv from 'keyv'
import { KeyvZiggurat } from 'ziggurat/keyv'
const keyv = new Keyv({ store: new KeyvZiggurat(${JSON.stringify(n)}, { size: '8MiB' }) })
const seen = await keyv.get('from-parent')
await keyv.set('from-child', { seen })
await keyv.disconnect()
console.log('done')`)
  assert.equal(out.trim(), 'done')
  assert.deepEqual(await keyv.get('from-child'), { seen: { pid: process.pid } })
  await keyv.disconnect()
})

test('cache-manager over Keyv over ziggurat, across two processes', async () => {
  const n = name('cache-manager')
  const cm = createCache({ stores: [new Keyv({ store: new KeyvZiggurat(n, { size: '8MiB' }) })] })
  assert.deepEqual(await cm.set('user:1', { name: 'Ada' }, 60_000), { name: 'Ada' })
  assert.deepEqual(await cm.get('user:1'), { name: 'Ada' })
  let loads = 0
  const load = async () => ({ n: ++loads })
  assert.deepEqual(await cm.wrap('w', load, 60_000), { n: 1 })
  assert.deepEqual(await cm.wrap('w', load, 60_000), { n: 1 })
  const out = child(`import Keyv from 'keyv'
import { createCache } from 'cache-manager'
import { KeyvZiggurat } from 'ziggurat/keyv'
const cm = createCache({ stores: [new Keyv({ store: new KeyvZiggurat(${JSON.stringify(n)}, { size: '8MiB' }) })] })
const user = await cm.get('user:1')
const w = await cm.wrap('w', async () => ({ n: 'child loaded' }), 60_000)
await cm.set('user:2', { name: 'Grace', by: 'child' }, 60_000)
await cm.del('user:1')
await cm.disconnect()
console.log(JSON.stringify([user, w]))`)
  assert.deepEqual(JSON.parse(out), [{ name: 'Ada' }, { n: 1 }])
  assert.deepEqual(await cm.get('user:2'), { name: 'Grace', by: 'child' })
  assert.equal(await cm.get('user:1'), undefined)
  await cm.clear()
  assert.equal(await cm.get('user:2'), undefined)
  await cm.disconnect()
})

test('bad arguments are refused, naming the argument', async () => {
  assert.throws(() => new KeyvZiggurat(42), { name: 'TypeError', message: /^new KeyvZiggurat\(\): cache must be/ })
  const c = new Cache(name('keyv-bad'), { size: '8MiB' })
  assert.throws(() => new KeyvZiggurat(c, { size: '1MiB' }), TypeError)
  const store = new KeyvZiggurat(c)
  await assert.rejects(store.set('k', 1, -5), { name: 'RangeError', message: /^KeyvZiggurat\.set\(\): ttl/ })
  c.close()
})
