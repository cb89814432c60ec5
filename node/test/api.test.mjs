// The API of one process: every method, its results and its errors.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { after, describe, test } from 'node:test'
import { execFileSync } from 'node:child_process'
import { Cache, LoadTimeoutError, Namespace, ZigguratError } from 'ziggurat'
import { cacheName, opener, python } from './agents.mjs'

const cache = opener()

describe('modules', () => {
  test('require and import give the same classes', () => {
    const require = createRequire(import.meta.url)
    const cjs = require('ziggurat')
    assert.equal(cjs.Cache, Cache)
    assert.equal(cjs.Namespace, Namespace)
  })
})

describe('values', () => {
  test('JSON data, strings, integers, BigInts and Buffers come back as stored', () => {
    const c = cache('values')
    const cases = [
      ['obj', { title: 'Hello', tags: ['a', 'b'], n: 2.5, ok: true, none: null }],
      ['arr', [1, 'two', { three: 3 }]],
      ['str', 'héllo ✓'],
      ['int', 42],
      ['neg', -7],
      ['float', 0.1],
      ['null', null],
      ['bool', false],
      ['big', 2n ** 60n],
    ]
    for (const [k, v] of cases) c.set(k, v)
    const other = new Cache(c.name, { l1Items: 0 })
    cache.keep(other)
    for (const [k, v] of cases) {
      assert.deepEqual(c.get(k), v, `${k} from L1`)
      assert.deepEqual(other.get(k), v, `${k} from the segment`)
    }
    c.set('buf', Buffer.from([0, 1, 2, 255]))
    c.set('u8', new Uint8Array([9, 8, 7]))
    assert.deepEqual(other.get('buf'), Buffer.from([0, 1, 2, 255]))
    assert.deepEqual(other.get('u8'), Buffer.from([9, 8, 7]))
    assert.ok(Buffer.isBuffer(other.get('buf')))
    assert.equal(other.get('missing'), undefined)
  })

  test('a row with Dates and undefined properties is stored as JSON.stringify writes it, for every process', async () => {
    const c = cache('rows')
    const row = { id: 7, title: 'Hi', createdAt: new Date(0), deletedAt: undefined, tags: ['a', undefined] }
    const json = { id: 7, title: 'Hi', createdAt: '1970-01-01T00:00:00.000Z', tags: ['a', null] }
    // The writing process reads the stored form too, not the object it wrote.
    c.set('row', row)
    assert.deepEqual(c.get('row'), json)
    assert.deepEqual(await c.getOrSet('loaded', async () => row), json)
    assert.deepEqual(c.get('loaded'), json)
    c.set('when', new Date(5))
    assert.equal(c.get('when'), '1970-01-01T00:00:00.005Z')
    // Another process of each language reads the same.
    const other = new Cache(c.name, { size: '8MiB' })
    assert.deepEqual(other.get('row'), json)
    other.close()
    const code =
      'import json, sys; from ziggurat import Cache; c = Cache(sys.argv[1], "8MiB"); ' +
      'print(json.dumps([c.get("row"), c.get("loaded"), c.get("when")])); c.close()'
    assert.deepEqual(JSON.parse(execFileSync(python(), ['-c', code, c.name], { encoding: 'utf8' })), [
      json,
      json,
      '1970-01-01T00:00:00.005Z',
    ])
    assert.equal(c.stats().storeFailures, 0)
  })

  test('values JSON would change are refused, naming the method, and nothing is stored', () => {
    const c = cache('refused')
    c.set('k', 'before')
    const bad = [
      [new Map([[1, 2]]), /Map/],
      [new Set([1]), /Set/],
      [{ when: new Map() }, /Map/],
      [{ f() {} }, /function/],
      [undefined, /undefined/],
      [NaN, /NaN/],
      [Infinity, /Infinity/],
      [{ n: 1n }, /BigInt/],
      [new (class Point {})(), /Point/],
      [Symbol('s'), /symbol/],
    ]
    for (const [v, re] of bad) {
      assert.throws(() => c.set('k', v), (e) => e instanceof TypeError && /^Cache\.set\(\): cannot store/.test(e.message) && re.test(e.message))
    }
    const cyclic = { a: 1 }
    cyclic.self = cyclic
    assert.throws(() => c.set('k', cyclic), /contains itself/)
    assert.throws(() => c.set('k', 2n ** 64n), RangeError)
    assert.equal(c.get('k'), 'before')
  })
})

describe('reads and writes', () => {
  test('set, get, has, delete', () => {
    const c = cache('basic')
    assert.equal(c.has('a'), false)
    c.set('a', { x: 1 })
    assert.equal(c.has('a'), true)
    assert.deepEqual(c.get('a'), { x: 1 })
    assert.equal(c.delete('a'), true)
    assert.equal(c.delete('a'), false)
    assert.equal(c.get('a'), undefined)
    assert.equal(c.has('a'), false)
  })

  test('string and Buffer keys name the same entry', () => {
    const c = cache('keys')
    c.set('kéy', 1)
    assert.equal(c.get(Buffer.from('kéy')), 1)
    c.set(Buffer.from('kéy'), 2)
    assert.equal(c.get('kéy'), 2)
  })

  test('an L1 hit is this object, and a write from another handle voids it', () => {
    const c = cache('l1')
    const v = { n: 1 }
    c.set('k', v)
    assert.equal(c.get('k'), v)
    const before = c.stats().l1.hits
    c.get('k')
    assert.equal(c.stats().l1.hits, before + 1)
    const other = new Cache(c.name)
    cache.keep(other)
    other.set('k', { n: 2 })
    assert.deepEqual(c.get('k'), { n: 2 })
    other.delete('k')
    assert.equal(c.get('k'), undefined)
  })

  test("copy: 'copy' returns a copy per hit; debug: true freezes cached objects", async () => {
    const copied = cache('copy', { copy: 'copy' })
    const v = { list: [1, 2], n: 1 }
    copied.set('k', v)
    v.n = 99
    const a = copied.get('k')
    const b = copied.get('k')
    assert.deepEqual(a, { list: [1, 2], n: 1 })
    assert.notEqual(a, b)
    a.n = 2
    assert.equal(copied.get('k').n, 1)

    const shared = cache('shared')
    shared.set('k', { n: 1 })
    assert.equal(shared.get('k'), shared.get('k'))

    const debug = cache('debug', { debug: true })
    debug.set('k', { inner: { n: 1 }, list: [1] })
    const d = debug.get('k')
    assert.throws(() => { d.inner.n = 2 }, TypeError)
    assert.throws(() => { d.list.push(2) }, TypeError)
    const loaded = await debug.getOrSet('g', () => ({ x: { y: 1 } }))
    assert.throws(() => { loaded.x.y = 2 }, TypeError)
    assert.throws(() => cache('badcopy', { copy: 'deep' }), RangeError)
  })

  test('ttl as seconds or a string; an expired value is gone', async () => {
    const c = cache('ttl')
    c.set('short', 1, { ttl: '400ms' }) // long enough to be read at once on a loaded machine
    c.set('long', 1, { ttl: '5m' })
    c.set('never', 1, { ttl: Infinity })
    assert.equal(c.get('short'), 1)
    await new Promise((r) => setTimeout(r, 500))
    assert.equal(c.get('short'), undefined)
    assert.equal(c.get('long'), 1)
    assert.equal(c.get('never'), 1)
  })

  test('add stores once', () => {
    const c = cache('add')
    assert.equal(c.add('job', 1, { ttl: 30 }), true)
    assert.equal(c.add('job', 2), false)
    assert.equal(c.get('job'), 1)
  })

  test('incr counts, from 0 or a default, beyond 2^53 as BigInt', () => {
    const c = cache('incr')
    assert.equal(c.incr('visits'), 1)
    assert.equal(c.incr('visits', 5), 6)
    assert.equal(c.incr('visits', -2n), 4)
    assert.equal(c.get('visits'), 4)
    assert.equal(c.incr('from', 1, { default: 10 }), 11)
    c.set('huge', 2 ** 53 - 1)
    assert.equal(c.incr('huge'), 2n ** 53n)
    c.set('text', 'abc')
    assert.throws(() => c.incr('text'), (e) => e instanceof TypeError && /^Cache\.incr\(\):/.test(e.message))
    c.set('top', 2n ** 63n - 1n)
    assert.throws(() => c.incr('top'), (e) => e instanceof RangeError && /64/.test(e.message))
    assert.equal(c.get('top'), 2n ** 63n - 1n)
  })

  test('touch gives a new lifetime', async () => {
    const c = cache('touch')
    c.set('k', 1, { ttl: 0.1 })
    assert.equal(c.touch('k', { ttl: Infinity }), true)
    await new Promise((r) => setTimeout(r, 150))
    assert.equal(c.get('k'), 1)
    assert.equal(c.touch('absent'), false)
  })

  test('invalidateTags voids the tagged entries only', () => {
    const c = cache('tags')
    c.set('p1', 1, { tags: ['posts'] })
    c.set('p2', 2, { tags: ['posts', 'user:1'] })
    c.set('u', 3, { tags: ['user:2'] })
    assert.equal(c.get('p1'), 1)
    c.invalidateTags('posts')
    assert.equal(c.get('p1'), undefined)
    assert.equal(c.get('p2'), undefined)
    assert.equal(c.get('u'), 3)
    c.invalidateTags(['user:2'])
    assert.equal(c.get('u'), undefined)
    c.set('many', 1, { tags: ['t9'] })
    c.invalidateTags(...Array.from({ length: 12 }, (_, i) => `t${i}`))
    assert.equal(c.get('many'), undefined)
  })

  test('clear empties the cache for every handle', () => {
    const c = cache('clear')
    const other = new Cache(c.name)
    cache.keep(other)
    c.set('a', 1)
    assert.equal(other.get('a'), 1)
    c.clear()
    assert.equal(other.get('a'), undefined)
    assert.equal(c.get('a'), undefined)
  })

  test('namespaces prefix keys and clear alone', () => {
    const c = cache('ns')
    const posts = c.namespace('posts')
    posts.set('1', 'hello')
    c.set('other', 1)
    assert.equal(c.get('posts:1'), 'hello')
    assert.equal(posts.get('1'), 'hello')
    assert.equal(posts.get(Buffer.from('1')), 'hello')
    posts.clear()
    assert.equal(posts.get('1'), undefined)
    assert.equal(c.get('other'), 1)
    assert.throws(() => c.namespace('a:b'), RangeError)
  })
})

describe('getOrSet', () => {
  test('loads once, then answers from the cache', async () => {
    const c = cache('gos')
    let calls = 0
    const load = async ({ signal }) => {
      assert.ok(signal instanceof AbortSignal)
      calls++
      return { id: 2 }
    }
    assert.deepEqual(await c.getOrSet('post:2', load, { ttl: '10m', tags: ['posts'] }), { id: 2 })
    assert.deepEqual(await c.getOrSet('post:2', load), { id: 2 })
    assert.equal(calls, 1)
    assert.equal(c.stats().loads, 1)
    c.invalidateTags('posts')
    await c.getOrSet('post:2', load)
    assert.equal(calls, 2)
  })

  test('concurrent calls of one key share one promise; a sync loader works', async () => {
    const c = cache('gos-shared')
    let calls = 0
    const load = () => {
      calls++
      return new Promise((r) => setTimeout(() => r('v'), 50))
    }
    const all = await Promise.all(Array.from({ length: 10 }, () => c.getOrSet('k', load)))
    assert.deepEqual(all, Array(10).fill('v'))
    assert.equal(calls, 1)
    assert.equal(await c.getOrSet('sync', () => 7), 7)
  })

  test('undefined and null are cached misses for negTtl', async () => {
    const c = cache('gos-neg')
    let calls = 0
    const load = () => {
      calls++
      return null
    }
    assert.equal(await c.getOrSet('k', load, { negTtl: 60 }), undefined)
    assert.equal(await c.getOrSet('k', load), undefined)
    assert.equal(calls, 1)
    assert.equal(c.has('k'), false)
    c.set('k', 1)
    assert.equal(await c.getOrSet('k', load), 1)
  })

  test('a failing loader rejects, and the next call loads again', async () => {
    const c = cache('gos-fail')
    await assert.rejects(c.getOrSet('k', () => { throw new Error('db down') }), /db down/)
    assert.equal(await c.getOrSet('k', () => 'ok'), 'ok')
    assert.equal(c.stats().loadErrors, 1)
  })

  test('the signal aborts at loaderTimeout', async () => {
    const c = cache('gos-abort', { loaderTimeout: 0.05 })
    let reason
    const v = await c.getOrSet('k', ({ signal }) =>
      new Promise((r) => signal.addEventListener('abort', () => { reason = signal.reason; r('late') })),
    )
    assert.equal(v, 'late')
    assert.ok(reason instanceof LoadTimeoutError)
  })

  test('a failing loader is answered with a value expired less than staleTtl ago', async () => {
    const c = cache('gos-stale', { staleTtl: 60 })
    assert.equal(await c.getOrSet('k', () => 'old', { ttl: 0.05 }), 'old')
    await new Promise((r) => setTimeout(r, 120))
    assert.equal(c.get('k'), undefined, 'expired')
    assert.equal(await c.getOrSet('k', () => { throw new Error('db down') }), 'old')
    assert.equal(c.stats().staleServed, 1)
    const strict = cache('gos-nostale')
    assert.equal(await strict.getOrSet('k', () => 'old', { ttl: 0.05 }), 'old')
    await new Promise((r) => setTimeout(r, 120))
    await assert.rejects(strict.getOrSet('k', () => { throw new Error('db down') }), /db down/)
  })

  test('a value that cannot be stored is still returned, with one warning', async (t) => {
    const c = cache('gos-unstorable')
    const warned = t.mock.method(process, 'emitWarning', () => {})
    const d = new Map([['a', 1]])
    assert.equal(await c.getOrSet('k', () => d), d)
    assert.equal(await c.getOrSet('k', () => d), d)
    assert.equal(c.get('k'), undefined)
    assert.equal(warned.mock.callCount(), 1, 'once per key')
    const [message, kind] = warned.mock.calls[0].arguments
    assert.equal(kind, 'ZigguratWarning')
    assert.match(message, /key "k": the value loaded for it was returned but not stored: Cache\.getOrSet\(\): cannot store a Map/)
    assert.deepEqual([c.stats().storeFailures, c.stats().loads], [2, 2])
  })
})

describe('bad input', () => {
  test('TypeError or RangeError naming the method and argument, nothing changed', async () => {
    const c = cache('bad')
    c.set('k', 'kept', { tags: ['t'] })
    const cases = [
      [() => c.set(42, 1), TypeError, /^Cache\.set\(\): key must be a string or a Buffer/],
      [() => c.set('', 1), RangeError, /^Cache\.set\(\): key must be 1 to 4096 bytes, got 0/],
      [() => c.set('x'.repeat(4097), 1), RangeError, /key must be 1 to 4096 bytes/],
      [() => c.set('\ud800', 1), TypeError, /^Cache\.set\(\): key is not valid UTF-8 \(lone surrogate at index 0\)/],
      [() => c.set('k', 1, { ttl: 0 }), RangeError, /^Cache\.set\(\): ttl must be a number of seconds > 0/],
      [() => c.set('k', 1, { ttl: -1 }), RangeError, /ttl/],
      [() => c.set('k', 1, { ttl: 'soon' }), RangeError, /^Cache\.set\(\): ttl: cannot read duration "soon"/],
      [() => c.set('k', 1, { ttl: [] }), TypeError, /^Cache\.set\(\): ttl must be a number of seconds or a string/],
      [() => c.set('k', 1, { tags: 'x'.split('').concat(Array(8).fill('t')) }), RangeError, /at most 8 tags/],
      [() => c.set('k', 1, { tags: [''] }), RangeError, /a tag must not be empty/],
      [() => c.set('k', 1, { tags: [1] }), TypeError, /each tag must be a string/],
      [() => c.set('k', 1, { tll: 5 }), TypeError, /^Cache\.set\(\): unknown option "tll"/],
      [() => c.set('k', 1, 5), TypeError, /options must be an object/],
      [() => c.get(null), TypeError, /^Cache\.get\(\): key must be/],
      [() => c.has({}), TypeError, /^Cache\.has\(\): key must be/],
      [() => c.delete(1), TypeError, /^Cache\.delete\(\): key/],
      [() => c.incr('n', 1.5), RangeError, /^Cache\.incr\(\): delta must be an integer/],
      [() => c.incr('n', '1'), TypeError, /^Cache\.incr\(\): delta must be an integer/],
      [() => c.touch('k', { ttl: 0 }), RangeError, /^Cache\.touch\(\): ttl must be/],
      [() => c.invalidateTags(), TypeError, /^Cache\.invalidateTags\(\): give at least one tag/],
      [() => c.invalidateTags(''), RangeError, /a tag must not be empty/],
      [() => c.add('k', undefined), TypeError, /^Cache\.add\(\): cannot store undefined/],
    ]
    for (const [f, cls, re] of cases) {
      assert.throws(f, (e) => e instanceof cls && re.test(e.message), `${f}`)
    }
    await assert.rejects(c.getOrSet('k2', 'nope'), (e) => e instanceof TypeError && /^Cache\.getOrSet\(\): loader must be a function/.test(e.message))
    await assert.rejects(c.getOrSet('k2', () => 1, { ttl: 0 }), (e) => e instanceof RangeError && /^Cache\.getOrSet\(\): ttl/.test(e.message))
    await assert.rejects(c.getOrSet('k2', () => 1, { negTtl: -5 }), (e) => e instanceof RangeError && /negTtl/.test(e.message))
    assert.equal(c.get('k'), 'kept')
    assert.equal(c.get('n'), undefined)
    assert.equal(c.has('k2'), false)
  })

  test('bad options of new Cache()', () => {
    const name = cacheName('badopts')
    const cases = [
      [() => new Cache(1), TypeError, /^new Cache\(\): name must be a string/],
      [() => new Cache('.x'), RangeError, /^new Cache\(\): name must be 1-80 characters/],
      [() => new Cache(name, { size: '12 parsecs' }), RangeError, /^new Cache\(\): size: cannot read size/],
      [() => new Cache(name, { size: -1 }), RangeError, /size must be a whole number of bytes/],
      [() => new Cache(name, { size: {} }), TypeError, /size must be a number of bytes or a string/],
      [() => new Cache(name, { ttl: 0 }), RangeError, /^new Cache\(\): ttl must be/],
      [() => new Cache(name, { jitter: 1 }), RangeError, /jitter must be in \[0, 1\)/],
      [() => new Cache(name, { l1Items: -1 }), RangeError, /l1Items must be an integer/],
      [() => new Cache(name, { loaderTimeout: '1 fortnight' }), RangeError, /loaderTimeout/],
      [() => new Cache(name, { hugePages: 'maybe' }), RangeError, /hugePages/],
      [() => new Cache(name, { redisUrl: 'redis://x' }), TypeError, /unknown option "redisUrl"/],
    ]
    for (const [f, cls, re] of cases) {
      assert.throws(f, (e) => e instanceof cls && re.test(e.message), `${f}`)
    }
  })

  test('sizes as in Python: a number of bytes or a string', () => {
    const a = cache('size-text', { size: '16MiB' })
    const b = cache('size-bytes', { size: 16 * 1024 * 1024 })
    const c = cache('size-small', { size: '4MB' })
    assert.equal(a.stats().host.file_size, b.stats().host.file_size)
    assert.ok(a.stats().host.file_size <= 16 * 1024 * 1024)
    assert.ok(c.stats().host.file_size <= 4_000_000)
    assert.ok(c.stats().host.file_size < a.stats().host.file_size / 2)
  })

  test('after close, every call throws', async () => {
    const c = cache('closed')
    c.set('k', 1)
    c.get('k')
    c.unlink()
    c.close()
    for (const f of [
      () => c.get('k'),
      () => c.has('k'),
      () => c.set('k', 1),
      () => c.add('k', 1),
      () => c.incr('k'),
      () => c.touch('k'),
      () => c.delete('k'),
      () => c.invalidateTags('t'),
      () => c.clear(),
      () => c.namespace('n'),
      () => c.stats(),
    ]) {
      assert.throws(f, (e) => e instanceof ZigguratError && /is closed/.test(e.message), `${f}`)
    }
    await assert.rejects(c.getOrSet('k', () => 1), ZigguratError)
  })
})

test('Symbol.dispose closes the cache, so that `using` does', () => {
  const name = cacheName('dispose')
  const c = new Cache(name, { size: '8MiB' })
  c.set('k', 1)
  assert.equal(typeof c[Symbol.dispose], 'function')
  c[Symbol.dispose]()
  assert.throws(() => c.get('k'), /Cache\.get\(\): cache ".*" is closed/)
  // Once closed, disposing again does nothing, as close() again does.
  c[Symbol.dispose]()
  const other = new Cache(name, { size: '8MiB' })
  assert.equal(other.get('k'), 1)
  other.unlink()
  other.close()
})

test("onWarning takes a cache's warnings instead of process.emitWarning", async () => {
  const seen = []
  const onProcess = (w) => {
    if (w.name === 'ZigguratWarning') seen.push(w)
  }
  process.on('warning', onProcess)
  try {
    const got = []
    const c = new Cache(cacheName('on-warning'), {
      directory: '/no/such/dir',
      degraded: 'local',
      onWarning: (w) => got.push(w),
    })
    assert.equal(got.length, 1)
    assert.ok(got[0] instanceof Error)
    assert.equal(got[0].name, 'ZigguratWarning')
    assert.match(got[0].message, /runs without its shared segment/)
    // A loaded value that cannot be stored is said through it too.
    await c.getOrSet('k', () => new Map())
    assert.equal(got.length, 2)
    assert.match(got[1].message, /key "k": the value loaded for it was returned but not stored/)
    c.close()
    // A logger that throws loses no warning: it goes to the process instead.
    new Cache(cacheName('on-warning'), {
      directory: '/no/such/dir',
      onWarning: () => {
        throw new Error('logger down')
      },
    }).close()
    await new Promise((r) => setImmediate(r))
    assert.equal(seen.length, 1)
    assert.match(seen[0].message, /runs without its shared segment/)
  } finally {
    process.off('warning', onProcess)
  }
  assert.throws(() => new Cache('x', { onWarning: 'log' }), {
    name: 'TypeError',
    message: 'new Cache(): onWarning must be a function, not string',
  })
})
