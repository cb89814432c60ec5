// serializer: 'msgpack': values as Python's serializer="msgpack" writes and
// reads them (Node.js writes, Python reads, and the reverse), counters shared
// with incr in both languages, the values msgpack holds beyond JSON, and the
// refusals.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { Cache } from 'ziggurat'
import { cacheName, opener, python } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const cache = opener({ serializer: 'msgpack' })

/** Runs `code` in Python on cache `name` opened with serializer="msgpack"; its printed JSON. */
function py(name, code) {
  const script = [
    'import json, sys, msgpack',
    'from ziggurat import Cache',
    "cache = Cache(sys.argv[1], size='8MiB', serializer='msgpack')",
    code,
  ].join('\n')
  const r = spawnSync(python(), ['-c', script, name], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('values Node.js writes read back in Node.js with their types', () => {
  for (const l1Items of [0, 100]) {
    const c = cache('mp-self', { l1Items })
    const values = {
      obj: { a: [1, 2.5, 'x', null, true], nested: { deep: [{}] } },
      empty: {},
      str: 'naïve ✓ 🎉',
      float: 1.5,
      nan: NaN,
      inf: -Infinity,
      bool: false,
      nil: null,
      buf: Buffer.from([0, 255, 128]),
      inner: { b: Buffer.from('ab'), n: 2n ** 60n, wide: 2 ** 40, neg: -(2 ** 40) },
      date: new Date(1700000000123),
      u64: 2n ** 64n - 1n,
    }
    for (const [k, v] of Object.entries(values)) c.set(k, v)
    for (const [k, v] of Object.entries(values)) {
      assert.deepEqual(c.get(k), v, k)
      assert.deepEqual(c.get(k), v, `${k} again (L1 when kept)`)
    }
    // Integers of 64 bits are counters, as in Python (and in the 'auto' encoding).
    c.set('n', 41)
    assert.equal(c.incr('n'), 42)
    c.set('big', 2n ** 62n)
    assert.equal(c.incr('big', 1), 2n ** 62n + 1n)
  }
})

test('setMany and getMany store and read msgpack values, as set and get do', () => {
  for (const l1Items of [0, 100]) {
    const c = cache('mp-many', { l1Items })
    const values = new Map([
      ['date', new Date(1700000000123)],
      ['obj', { at: new Date(5), n: 2n ** 60n }],
      ['n', 7],
    ])
    c.setMany(values)
    assert.deepEqual(c.getMany(values.keys()), values)
    for (const [k, v] of values) assert.deepEqual(c.get(k), v, k)
    assert.equal(c.incr('n'), 8)
  }
})

test('Node.js writes, Python reads with serializer="msgpack"', () => {
  const c = cache('mp-to-py', { l1Items: 0 })
  c.set('obj', { a: [1, 2.5, 'x'], m: null })
  c.set('str', 'naïve')
  c.set('buf', Buffer.from([1, 2, 3]))
  c.set('inner', { b: Buffer.from('ab'), big: 2n ** 60n, wide: 2 ** 40, f: 0.25 })
  c.set('date', new Date(1700000000123))
  c.set('u64', 2n ** 64n - 1n)
  c.set('counter', 7)
  c.set('float', 2.5)
  const got = py(
    c.name,
    `
out = {}
for k in ['obj', 'str', 'buf', 'inner', 'date', 'u64', 'counter', 'float']:
    v = cache.get(k)
    out[k] = [type(v).__name__, repr(v)]
inner = cache.get('inner')
out['inner.b'] = type(inner['b']).__name__
out['inner.big'] = [type(inner['big']).__name__, inner['big'] == 2**60]
out['inner.wide'] = [type(inner['wide']).__name__, inner['wide'] == 2**40]
d = cache.get('date')
out['date.ms'] = d.seconds * 1000 + d.nanoseconds // 1000000
out['incr'] = cache.incr('counter')
print(json.dumps(out))
`,
  )
  assert.deepEqual(got.obj, ['dict', "{'a': [1, 2.5, 'x'], 'm': None}"])
  assert.deepEqual(got.str, ['str', "'naïve'"])
  assert.deepEqual(got.buf, ['bytes', "b'\\x01\\x02\\x03'"])
  assert.equal(got['inner.b'], 'bytes')
  assert.deepEqual(got['inner.big'], ['int', true])
  assert.deepEqual(got['inner.wide'], ['int', true], 'a safe integer beyond 32 bits is an int, not a float')
  assert.equal(got.date[0], 'Timestamp')
  assert.equal(got['date.ms'], 1700000000123)
  assert.deepEqual(got.u64, ['int', String(2n ** 64n - 1n)])
  assert.deepEqual(got.counter, ['int', '7'])
  assert.deepEqual(got.float, ['float', '2.5'])
  assert.equal(got.incr, 8, "Python's incr of a counter Node.js set")
  assert.equal(c.get('counter'), 8)
})

test('Python writes with serializer="msgpack", Node.js reads', () => {
  const c = cache('mp-from-py', { l1Items: 100 })
  py(
    c.name,
    `
cache.set('obj', {'a': [1, 2.5, 'x'], 'n': None, 'nested': {'t': (1, 2)}})
cache.set('intkeys', {1: 'a', 'b': 2})
cache.set('bytes', b'\\x00\\xff')
cache.set('str', 'naïve ✓')
cache.set('float', 1.25)
cache.set('none', None)
cache.set('u64', 2**64 - 1)
cache.set('inner', {'big': 2**62, 'wide': 2**40, 'b': b'ab'})
cache.set('ts', msgpack.Timestamp.from_unix_nano(1700000000123000000))
cache.set('counter', 5)
print('{}')
`,
  )
  assert.deepEqual(c.get('obj'), { a: [1, 2.5, 'x'], n: null, nested: { t: [1, 2] } })
  assert.deepEqual(c.get('intkeys'), { 1: 'a', b: 2 })
  assert.deepEqual(c.get('bytes'), Buffer.from([0, 255]))
  assert.equal(c.get('str'), 'naïve ✓')
  assert.equal(c.get('float'), 1.25)
  assert.equal(c.get('none'), null)
  assert.equal(c.get('u64'), 2n ** 64n - 1n)
  assert.deepEqual(c.get('inner'), { big: 2n ** 62n, wide: 2 ** 40, b: Buffer.from('ab') })
  assert.deepEqual(c.get('ts'), new Date(1700000000123))
  assert.equal(c.incr('counter', 2), 7)
  assert.equal(c.stats().decodeErrors, 0)
  assert.equal(c.stats().foreign, 0)
})

test('getOrSet lands msgpack values, which Python reads', async () => {
  const c = cache('mp-load', { l1Items: 100 })
  const v = { when: new Date(0), data: Buffer.from('xy') }
  assert.deepEqual(await c.getOrSet('k', async () => v), v)
  assert.deepEqual(await c.getOrSet('k', async () => 'not called'), v)
  const got = py(c.name, "v = cache.get('k'); print(json.dumps([type(v['when']).__name__, v['data'].hex()]))")
  assert.deepEqual(got, ['Timestamp', '7879'])
})

test('a failed load is answered with the stale msgpack value', async () => {
  const c = cache('mp-stale', { l1Items: 100, staleTtl: 60 })
  const v = { at: new Date(5), n: [1.5] }
  await c.getOrSet('k', () => v, { ttl: '50ms' })
  await new Promise((r) => setTimeout(r, 120))
  const got = await c.getOrSet('k', () => {
    throw new Error('source down')
  })
  assert.deepEqual(got, v)
  assert.notEqual(got, v, 'decoded from the segment, not the object kept in L1')
  assert.equal(c.stats().staleServed, 1)
})

test("an 'auto' cache does not read msgpack values (one serializer per cache)", () => {
  const c = cache('mp-mixed', { l1Items: 0 })
  c.set('obj', { a: 1 })
  c.set('n', 3)
  const auto = new Cache(c.name, { size: '8MiB', l1Items: 0 })
  cache.keep(auto)
  assert.equal(auto.get('obj'), undefined)
  assert.equal(auto.get('n'), 3, 'counters are the same in both')
})

test('an undefined inside a value is written as JSON writes it: a property left out, an array item null', () => {
  const c = cache('mp-undefined', { l1Items: 0 })
  c.set('k', { a: undefined, b: [1, undefined], at: new Date(0) })
  assert.deepEqual(c.get('k'), { b: [1, null], at: new Date(0) })
})

test('values msgpack would change are refused, naming the method, nothing stored', async () => {
  const c = cache('mp-refuse', { l1Items: 100 })
  c.set('k', 'before')
  class Point {
    x = 1
  }
  const bad = [
    undefined,
    () => 1,
    Symbol('s'),
    new Set([1]),
    new Point(),
    new Date(NaN),
    '\ud800',
    [() => 1],
    new Map([['a', 1]]),
    { m: new Map() },
  ]
  for (const v of bad) {
    assert.throws(
      () => c.set('k', v),
      (e) => e instanceof TypeError && e.message.startsWith('Cache.set(): ') && e.message.includes("'msgpack'"),
      String(v?.constructor?.name ?? typeof v),
    )
  }
  const self = { a: 1 }
  self.self = self
  assert.throws(() => c.set('k', self), /Cache\.set\(\): cannot store a value that contains itself/)
  assert.throws(() => c.set('k', 2n ** 64n), /Cache\.set\(\): a BigInt value must be from -2\^63 to 2\^64 - 1/)
  assert.throws(() => c.add('k', { b: 2n ** 64n }), /Cache\.add\(\): a BigInt inside a value must be from/)
  assert.throws(() => c.set('k', [5n]), /Cache\.set\(\): a BigInt inside a value must be beyond/)
  assert.equal(c.get('k'), 'before')
})

test('serializer: a bad value is refused, naming the option', () => {
  assert.throws(
    () => new Cache(cacheName('mp-bad'), { serializer: 'pickle' }),
    (e) => e instanceof RangeError && e.message === "new Cache(): serializer must be 'auto' or 'msgpack', got \"pickle\"",
  )
  assert.throws(
    () => new Cache(cacheName('mp-bad'), { serializer: 1 }),
    (e) => e instanceof TypeError && e.message === "new Cache(): serializer must be 'auto' or 'msgpack', not number",
  )
})

test('without msgpackr installed, serializer: msgpack says what to install', () => {
  // A process in which msgpackr cannot be found, as when the optional peer dependency is not installed.
  const hide = `
const Module = require('node:module')
const resolve = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  if (request === 'msgpackr') {
    const e = new Error("Cannot find module 'msgpackr'")
    e.code = 'MODULE_NOT_FOUND'
    throw e
  }
  return resolve.call(this, request, ...rest)
}
const { Cache } = require('ziggurat')
try {
  new Cache(process.argv[1], { size: '8MiB', serializer: 'msgpack' })
} catch (e) {
  console.log(e.message)
}
const c = new Cache(process.argv[1], { size: '8MiB' })
c.set('k', { auto: true })
console.log(JSON.stringify(c.get('k')))
c.unlink()
c.close()
`
  const r = spawnSync(process.execPath, ['-e', hide, cacheName('mp-missing')], { cwd: here, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  const [message, auto] = r.stdout.trim().split('\n')
  assert.equal(
    message,
    "new Cache(): serializer: 'msgpack' needs the msgpackr package, which is not installed: " +
      "npm install msgpackr@2.1.4 (or leave serializer at 'auto')",
  )
  assert.equal(auto, '{"auto":true}', "an 'auto' cache needs no msgpackr")
})
