// memoize (Python's Cache.cached): a function's results cached through
// getOrSet, keyed by its name and its arguments as canonical JSON.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, test } from 'node:test'
import { Cache, ZigguratError } from 'ziggurat'
import { cacheName, opener } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))

const cache = opener()

describe('memoize', () => {
  test('calls go through getOrSet: one call per distinct arguments, concurrent calls sharing one', async () => {
    const c = cache('memo')
    const calls = []
    const user = c.memoize(
      async function user(id, opts) {
        calls.push([id, opts])
        return { id, ...opts }
      },
      { ttl: '10m' },
    )
    assert.equal(user.name, 'user')
    const [a, b] = await Promise.all([user(5, { full: true }), user(5, { full: true })])
    assert.deepEqual(a, { id: 5, full: true })
    assert.equal(a, b)
    assert.deepEqual(await user(5, { full: true }), { id: 5, full: true })
    assert.deepEqual(await user(6, { full: true }), { id: 6, full: true })
    assert.equal(calls.length, 2)
    // The key is the name and a digest of the arguments, object keys in any order.
    assert.match(user.key(5, { full: true }), /^user:[0-9a-f]{32}$/)
    assert.equal(user.key(5, { a: 1, b: 2 }), user.key(5, { b: 2, a: 1 }))
    assert.notEqual(user.key(5), user.key('5'))
    assert.notEqual(user.key(5), user.key([5]))
    assert.deepEqual(c.get(user.key(5, { full: true })), { id: 5, full: true })
    // invalidate removes one call's result: the next call runs the function again.
    assert.equal(user.invalidate(5, { full: true }), true)
    assert.equal(user.invalidate(5, { full: true }), false)
    await user(5, { full: true })
    assert.equal(calls.length, 3)
  })

  test('another process computes the same key for the same call, and finds its result', async () => {
    const c = cache('memo-x')
    let calls = 0
    const total = c.memoize(async (o) => ++calls && o.n.reduce((x, y) => x + y, 0), { name: 'total' })
    assert.equal(await total({ n: [1, 2], s: 'é' }), 3)
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { Cache } from 'ziggurat'
         const c = new Cache(${JSON.stringify(c.name)}, { size: '8MiB' })
         let calls = 0
         const total = c.memoize(async (o) => { calls++; return -1 }, { name: 'total' })
         // The same argument, its keys in another order.
         const arg = { s: 'é', n: [1, 2] }
         console.log(JSON.stringify({ k: total.key(arg), v: await total(arg), calls }))
         c.close()`,
      ],
      { cwd: here, encoding: 'utf8' },
    )
    assert.deepEqual(JSON.parse(out), { k: total.key({ n: [1, 2], s: 'é' }), v: 3, calls: 0 })
    assert.equal(calls, 1)
  })

  test('options: key, tags (a list or a function of the arguments), negTtl, and this', async () => {
    const c = cache('memo-opts')
    let calls = 0
    const post = c.memoize(
      async (id) => {
        calls++
        return id === 0 ? null : { id }
      },
      { name: 'post', key: (id) => `id=${id}`, tags: (id) => [`post:${id}`, 'posts'] },
    )
    assert.equal(post.key(3), 'post:id=3')
    await post(3)
    await post(4)
    assert.deepEqual(c.get('post:id=3'), { id: 3 })
    c.invalidateTags('post:3')
    assert.equal(c.get('post:id=3'), undefined)
    assert.deepEqual(c.get('post:id=4'), { id: 4 })
    // A null result is cached as a miss for negTtl, as getOrSet's.
    assert.equal(await post(0), undefined)
    assert.equal(await post(0), undefined)
    assert.equal(calls, 3)
    const fixed = c.memoize(async () => 'v', { name: 'fixed', tags: ['t'] })
    await fixed()
    c.invalidateTags('t')
    assert.equal(c.get(fixed.key()), undefined)
    const obj = {
      base: 10,
      add: c.memoize(async function (x) {
        return this.base + x
      }, { name: 'add' }),
    }
    assert.equal(await obj.add(1), 11)
  })

  test('on a Namespace: keys under its prefix, cleared with it', async () => {
    const c = cache('memo-ns')
    const ns = c.namespace('users')
    let calls = 0
    const load = ns.memoize(async (id) => ++calls && { id }, { name: 'load' })
    await load(1)
    assert.equal(load.key(1), `load:${load.key(1).split(':')[1]}`)
    assert.deepEqual(c.get(`users:${load.key(1)}`), { id: 1 })
    ns.clear()
    await load(1)
    assert.equal(calls, 2)
    assert.equal(load.invalidate(1), true)
  })

  test('bad options are refused at memoize(), naming it and the option', () => {
    const c = cache('memo-bad')
    const f = async function f() {}
    const bad = [
      [[42], TypeError, /^Cache\.memoize\(\): fn must be a function, not number/],
      [[async () => 1], TypeError, /^Cache\.memoize\(\): name must be a non-empty string .* an anonymous function needs options\.name/],
      [[f, { name: 7 }], TypeError, /^Cache\.memoize\(\): name must be a non-empty string/],
      [[f, { ttl: 0 }], RangeError, /^Cache\.memoize\(\): ttl must be a number of seconds > 0/],
      [[f, { negTtl: 'soon' }], RangeError, /^Cache\.memoize\(\)/],
      [[f, { tags: [1] }], TypeError, /^Cache\.memoize\(\): each tag must be a string/],
      [[f, { key: 'k' }], TypeError, /^Cache\.memoize\(\): key must be a function of the arguments returning a string, not string/],
      [[f, { tll: 1 }], TypeError, /^Cache\.memoize\(\): unknown option "tll"/],
    ]
    for (const [a, type, message] of bad) {
      assert.throws(() => c.memoize(...a), (e) => e instanceof type && message.test(e.message), String(a[1]))
    }
    assert.throws(() => c.namespace('n').memoize(1), /^TypeError: Namespace\.memoize\(\): fn must be a function/)
  })

  test('arguments that are not JSON data are refused, naming the argument, and the function is not called', async () => {
    const c = cache('memo-args')
    let calls = 0
    const f = c.memoize(async function find() {
      calls++
      return 1
    })
    const cyclic = {}
    cyclic.self = cyclic
    const bad = [
      [[new Date(0)], /argument 0 is a Date, which is not JSON data; pass options\.key/],
      [[1, undefined], /argument 1 is undefined/],
      [[{ a: { b: [1, NaN] } }], /argument 0\.a\.b\[1\] is NaN/],
      [[1n], /argument 0 is a bigint/],
      [[new Map()], /argument 0 is a Map/],
      [[() => 1], /argument 0 is a function/],
      [[cyclic], /argument 0\.self is an object that contains itself/],
      [['\ud800'], /argument 0 is a string with a lone surrogate/],
    ]
    for (const [a, message] of bad) {
      await assert.rejects(f(...a), (e) => {
        assert.ok(e instanceof TypeError)
        assert.match(e.message, /^Cache\.memoize\(\): cannot build a cache key for find\(\): /)
        assert.match(e.message, message)
        return true
      })
      assert.throws(() => f.key(...a), TypeError)
    }
    assert.equal(calls, 0)
    const k = c.memoize(async (x) => x, { name: 'k', key: () => 5 })
    await assert.rejects(k(1), /^TypeError: Cache\.memoize\(\): the key function returned number, not a string/)
    const t = c.memoize(async (x) => x, { name: 't', tags: () => 'x'.repeat(0) })
    await assert.rejects(t(1), /^RangeError: Cache\.memoize\(\): a tag must not be empty/)
  })

  test('a closed cache refuses memoize() and the memoized calls', async () => {
    const c = new Cache(cacheName('memo-closed'), { size: '8MiB' })
    const f = c.memoize(async function f() {
      return 1
    })
    c.unlink()
    c.close()
    assert.throws(() => c.memoize(f), (e) => e instanceof ZigguratError && /^Cache\.memoize\(\)/.test(e.message))
    await assert.rejects(f(), (e) => e instanceof ZigguratError && /^Cache\.getOrSet\(\)/.test(e.message))
  })
})
