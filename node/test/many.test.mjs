// Many keys at once (getMany, setMany, deleteMany) and decr, on a Cache and a
// Namespace: results, errors that change nothing, other processes and Python.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, describe, test } from 'node:test'
import { Cache, ZigguratError } from 'ziggurat'
import { cacheName, opener, python } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))

const cache = opener()

/** Runs Python `code` with the cache's name as sys.argv[1]; its stdout parsed as JSON. */
function py(name, code) {
  const prelude = 'import json, sys\nfrom ziggurat import Cache\nc = Cache(sys.argv[1], "8MiB")\n'
  return JSON.parse(execFileSync(python(), ['-c', prelude + code, name], { encoding: 'utf8' }))
}

/** Runs an ES module in a Node.js process of its own; its stdout parsed as JSON. */
function node(code) {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: here, encoding: 'utf8' }))
}

describe('getMany', () => {
  test('a Map of the present keys, as given, to their values', () => {
    const c = cache('gm')
    c.set('a', { n: 1 })
    c.set(Buffer.from('b'), 'bee')
    c.set('n', 5)
    const key = Buffer.from('b')
    const got = c.getMany(['a', key, 'n', 'missing'])
    assert.ok(got instanceof Map)
    assert.deepEqual([...got.keys()], ['a', key, 'n'])
    assert.deepEqual(got.get('a'), { n: 1 })
    assert.equal(got.get(key), 'bee')
    assert.equal(got.get('n'), 5)
    // Any iterable of keys; a second read is answered by L1 alike.
    assert.deepEqual([...c.getMany(new Set(['a', 'missing'])).keys()], ['a'])
    assert.equal(c.getMany([]).size, 0)
  })

  test('bad keys anywhere are refused, naming the method, before any read', () => {
    const c = cache('gm-bad')
    c.set('a', 1)
    const before = c.stats()
    for (const [keys, type, message] of [
      ['ab', TypeError, /^Cache\.getMany\(\): keys must be an iterable of keys, not a single key/],
      [Buffer.from('ab'), TypeError, /not a single key/],
      [42, TypeError, /^Cache\.getMany\(\): keys must be an iterable of keys \(an array, a Set\.\.\.\), not number/],
      [['a', 7], TypeError, /^Cache\.getMany\(\): key must be a string or a Buffer/],
      [['a', 'x'.repeat(5000)], RangeError, /^Cache\.getMany\(\)/],
    ]) {
      assert.throws(() => c.getMany(keys), (e) => e instanceof type && message.test(e.message))
    }
    const now = c.stats()
    assert.equal(now.l1.hits, before.l1.hits)
    assert.equal(now.l1.misses, before.l1.misses)
  })

  test('reads what another Node.js process and Python (set_many) stored', () => {
    const c = cache('gm-x')
    node(`import { Cache } from 'ziggurat'
      const c = new Cache(${JSON.stringify(c.name)}, { size: '8MiB' })
      c.setMany({ fromNode: [1, 2] })
      console.log(JSON.stringify(true))
      c.close()`)
    py(c.name, 'c.set_many({"fromPy": {"a": 1}, "count": 3}); print(json.dumps(True))')
    const got = c.getMany(['fromNode', 'fromPy', 'count', 'absent'])
    assert.deepEqual(Object.fromEntries(got), { fromNode: [1, 2], fromPy: { a: 1 }, count: 3 })
  })
})

describe('setMany', () => {
  test('a plain object, a Map or an iterable of pairs, with ttl and tags', () => {
    const c = cache('sm')
    c.setMany({ a: 1, b: 'two' })
    c.setMany(new Map([[Buffer.from('c'), { three: 3 }]]), { tags: ['t'] })
    c.setMany(
      [
        ['d', [4]],
        ['e', 5n],
      ],
      { ttl: '10m', tags: ['t', 'u'] },
    )
    assert.deepEqual(Object.fromEntries(c.getMany(['a', 'b', 'c', 'd', 'e'])), {
      a: 1,
      b: 'two',
      c: { three: 3 },
      d: [4],
      // As after set(): L1 keeps the BigInt it was given.
      e: 5n,
    })
    c.invalidateTags('t')
    assert.deepEqual([...c.getMany(['a', 'b', 'c', 'd', 'e']).keys()], ['a', 'b'])
  })

  test('Python reads what setMany stored (get_many)', () => {
    const c = cache('sm-x')
    c.setMany({ x: { deep: [1, 'two'] }, n: 9 })
    assert.deepEqual(py(c.name, 'print(json.dumps(c.get_many(["x", "n", "no"])))'), { x: { deep: [1, 'two'] }, n: 9 })
  })

  test('bad input anywhere writes nothing, naming the method and what is wrong', () => {
    const c = cache('sm-bad')
    c.set('keep', 'old')
    const bad = [
      [[{ keep: 'new', f: () => 1 }], TypeError, /^Cache\.setMany\(\): cannot store a function.*\(the value of "f"\)/],
      [[{ keep: 'new', n: NaN }], TypeError, /^Cache\.setMany\(\): .*\(the value of "n"\)/],
      [[[['keep', 'new'], ['', 1]]], RangeError, /^Cache\.setMany\(\)/],
      [[[['keep', 'new'], ['x']]], TypeError, /^Cache\.setMany\(\): each entry must be a \[key, value\] pair, not an array/],
      [[[['keep', 'new'], 'xy']], TypeError, /each entry must be a \[key, value\] pair, not string/],
      [['keep'], TypeError, /^Cache\.setMany\(\): entries must be a Map, an object or an iterable of \[key, value\] pairs, not string/],
      [[null], TypeError, /entries must be .* not null/],
      [[{ keep: 'new' }, { ttl: 0 }], RangeError, /^Cache\.setMany\(\): ttl must be a number of seconds > 0/],
      [[{ keep: 'new' }, { tll: 5 }], TypeError, /^Cache\.setMany\(\): unknown option "tll"/],
      [[{ keep: 'new' }, { tags: Array(9).fill('t') }], RangeError, /^Cache\.setMany\(\): at most 8 tags/],
    ]
    for (const [a, type, message] of bad) {
      assert.throws(() => c.setMany(...a), (e) => e instanceof type && message.test(e.message), String(a[0]))
    }
    assert.equal(c.get('keep'), 'old')
    assert.equal(c.stats().host.sets, 1)
  })
})

describe('deleteMany', () => {
  test('removes the keys for every process; how many held a value', () => {
    const c = cache('dm')
    c.setMany({ a: 1, b: 2, c: 3 })
    assert.equal(c.get('a'), 1)
    assert.equal(c.deleteMany(['a', 'b', 'missing']), 2)
    assert.deepEqual([...c.getMany(['a', 'b', 'c']).keys()], ['c'])
    const seen = py(c.name, 'print(json.dumps([c.get("a"), c.get("c")]))')
    assert.deepEqual(seen, [null, 3])
  })

  test('a bad key anywhere deletes nothing', () => {
    const c = cache('dm-bad')
    c.setMany({ a: 1, b: 2 })
    assert.throws(() => c.deleteMany(['a', {}]), (e) => e instanceof TypeError && /^Cache\.deleteMany\(\): key must be/.test(e.message))
    assert.throws(() => c.deleteMany('a'), /^TypeError: Cache\.deleteMany\(\): keys must be an iterable of keys, not a single key/)
    assert.equal(c.getMany(['a', 'b']).size, 2)
  })
})

describe('decr', () => {
  test('incr by -delta, atomically for every process, in Python too', () => {
    const c = cache('decr')
    c.set('stock', 10)
    assert.equal(c.decr('stock'), 9)
    assert.equal(c.decr('stock', 4), 5)
    assert.equal(c.decr('stock', -2n), 7)
    assert.equal(c.decr('fresh', 1, { default: 100 }), 99)
    assert.equal(c.decr('zero'), -1)
    assert.equal(py(c.name, 'c.decr("stock", 3); print(json.dumps(c.get("stock")))'), 4)
    assert.equal(c.get('stock'), 4)
  })

  test('its errors name decr and change nothing', () => {
    const c = cache('decr-bad')
    c.set('n', 5)
    c.set('s', 'text')
    const bad = [
      [['n', 1.5], RangeError, /^Cache\.decr\(\): delta must be an integer, got 1\.5/],
      [['n', '1'], TypeError, /^Cache\.decr\(\): delta must be an integer \(number or BigInt\), not string/],
      [['n', -(2n ** 63n)], RangeError, /^Cache\.decr\(\): delta must be > -2\^63/],
      [['n', 1, { defualt: 0 }], TypeError, /^Cache\.decr\(\): unknown option "defualt"/],
      [['s', 1], TypeError, /^Cache\.decr\(\)/],
      [[7, 1], TypeError, /^Cache\.decr\(\): key must be/],
    ]
    for (const [a, type, message] of bad) {
      assert.throws(() => c.decr(...a), (e) => e instanceof type && message.test(e.message), String(a[1]))
    }
    c.set('low', -(2n ** 63n))
    assert.throws(() => c.decr('low'), (e) => e instanceof RangeError && /^Cache\.decr\(\)/.test(e.message))
    assert.equal(c.get('n'), 5)
    assert.equal(c.get('s'), 'text')
    assert.equal(c.get('low'), -(2n ** 63n))
  })
})

describe('on a Namespace', () => {
  test('the same methods under the prefix, seen by the cache and by Python', () => {
    const c = cache('ns-many')
    const users = c.namespace('users')
    users.setMany({ 1: { name: 'Ada' }, 2: { name: 'Grace' } }, { ttl: 60 })
    assert.equal(c.get('users:1').name, 'Ada')
    const got = users.getMany(['1', '2', '3'])
    assert.deepEqual([...got.keys()], ['1', '2'])
    assert.equal(got.get('2').name, 'Grace')
    users.set('n', 3)
    assert.equal(users.decr('n'), 2)
    assert.deepEqual(py(c.name, 'print(json.dumps(c.namespace("users").get_many(["1", "n"])))'), {
      1: { name: 'Ada' },
      n: 2,
    })
    assert.equal(users.deleteMany(['1', 'nope']), 1)
    assert.equal(c.get('users:1'), undefined)
    // Written through the namespace: its clear() voids them.
    users.clear()
    assert.equal(users.getMany(['2', 'n']).size, 0)
  })

  test('its errors name the Namespace method and change nothing', () => {
    const c = cache('ns-many-bad')
    const ns = c.namespace('ns')
    ns.set('a', 1)
    assert.throws(() => ns.getMany('a'), /^TypeError: Namespace\.getMany\(\): keys must be an iterable of keys/)
    assert.throws(() => ns.setMany({ a: 2, b: Symbol('x') }), /^TypeError: Cache\.setMany\(\): cannot store a symbol/)
    assert.throws(() => ns.setMany([['a', 2], [null, 1]]), /^TypeError: Namespace\.setMany\(\): key must be/)
    assert.throws(() => ns.deleteMany(['a', 1]), /^TypeError: Namespace\.deleteMany\(\): key must be/)
    assert.throws(() => ns.decr(null), /^TypeError: Namespace\.decr\(\): key must be/)
    assert.equal(ns.get('a'), 1)
  })
})

describe('closed and degraded caches', () => {
  test('a closed cache refuses every method, naming it', () => {
    const c = new Cache(cacheName('many-closed'), { size: '8MiB' })
    c.unlink()
    c.close()
    for (const [m, a] of [
      ['getMany', [['a']]],
      ['setMany', [{ a: 1 }]],
      ['deleteMany', [['a']]],
      ['decr', ['a']],
    ]) {
      assert.throws(() => c[m](...a), (e) => e instanceof ZigguratError && e.message.startsWith(`Cache.${m}(): `))
    }
  })

  test("degraded: 'local' keeps them in this process", () => {
    const c = new Cache(cacheName('many-local'), { directory: '/no/such/dir', degraded: 'local', degradedTtl: 60 })
    process.removeAllListeners('warning')
    c.setMany({ a: 1, b: 2 })
    assert.deepEqual(Object.fromEntries(c.getMany(['a', 'b', 'c'])), { a: 1, b: 2 })
    assert.equal(c.decr('a'), 0)
    // As a degraded delete, and as in Python: no process's entry is known to be gone.
    assert.equal(c.deleteMany(['a', 'c']), 0)
    assert.deepEqual([...c.getMany(['a', 'b']).keys()], ['b'])
    c.close()
  })
})
