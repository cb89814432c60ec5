// The cache option `copy`: what a hit returns. With 'decode' every hit is
// decoded anew from the stored encoding, so that a caller may change what it
// got, however deep, and no other caller sees it; with 'shared' (the default)
// every caller of the process gets the one object, and sees a change.
import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { after, describe, test } from 'node:test'
import { Cache } from 'ziggurat'
import { agent, cacheName, opener, removedAfter } from './agents.mjs'

const cache = opener()

/** A value with something to change at every level. */
function post() {
  return { title: 'Hello', meta: { tags: ['a'], author: { name: 'Ada' } } }
}

/** Changes `v` (a post()) deep down. */
function mutate(v) {
  v.meta.tags.push('changed')
  v.meta.author.name = 'changed'
}

const FRESH = post()

/**
 * For each way of reading a value of cache `c`, whether a deep change of
 * what one caller got is seen by the next get.
 */
async function seenAfter(c) {
  const seen = {}
  const check = (what, key, v) => {
    mutate(v)
    seen[what] = JSON.stringify(c.get(key)) !== JSON.stringify(FRESH)
  }
  c.set('set', post())
  c.get('set')
  check('get (L1 hit)', 'set', c.get('set'))
  c.set('loaded', post())
  check('getOrSet (hit)', 'loaded', await c.getOrSet('loaded', () => post()))
  check('getOrSet (loader)', 'miss', await c.getOrSet('miss', () => post()))
  c.setMany({ m1: post() })
  check('getMany', 'm1', c.getMany(['m1']).get('m1'))
  const ns = c.namespace('ns')
  ns.set('1', post())
  check('Namespace.get', 'ns:1', ns.get('1'))
  const memo = c.memoize(async (id) => ({ ...post(), id }), { name: 'memo' })
  const m = await memo(1)
  mutate(m)
  seen['memoize'] = (await memo(1)).meta.author.name === 'changed'
  return seen
}

describe("copy: 'decode'", () => {
  test('a deep change of what get, getOrSet, getMany, a namespace or memoize gave is not seen by the next get', async () => {
    const seen = await seenAfter(cache('decode', { copy: 'decode' }))
    for (const [what, s] of Object.entries(seen)) assert.equal(s, false, `${what}: the change was seen`)
  })

  test("with 'shared' the same change is seen (what 'decode' prevents)", async () => {
    const seen = await seenAfter(cache('shared', { copy: 'shared' }))
    for (const [what, s] of Object.entries(seen)) assert.equal(s, true, `${what}: the change was not seen`)
  })

  test('every hit is a new object, equal to the stored value; numbers and strings come back as they are', () => {
    const c = cache('fresh', { copy: 'decode' })
    c.set('k', post())
    const a = c.get('k')
    const b = c.get('k')
    assert.notEqual(a, b)
    assert.notEqual(a.meta, b.meta)
    assert.deepEqual(a, FRESH)
    assert.ok(c.stats().l1.hits >= 1, 'answered by L1')
    c.set('n', 5)
    c.incr('n')
    assert.equal(c.get('n'), 6)
    c.set('s', 'text')
    assert.equal(c.get('s'), 'text')
    c.set('big', 2n ** 60n)
    assert.equal(c.get('big'), 2n ** 60n)
  })

  test('a Buffer changed by its reader is not changed in the cache', () => {
    const c = cache('bytes', { copy: 'decode' })
    const stored = Buffer.from([1, 2, 3])
    c.set('b', stored)
    stored[0] = 9
    const got = c.get('b')
    assert.deepEqual(got, Buffer.from([1, 2, 3]))
    got[1] = 9
    assert.deepEqual(c.get('b'), Buffer.from([1, 2, 3]))
    assert.ok(Buffer.isBuffer(c.get('b')))
  })

  test("with serializer 'msgpack', a nested Buffer read from the segment is the reader's own", () => {
    const c = cache('msgpack', { copy: 'decode', serializer: 'msgpack' })
    const writer = cache.keep(new Cache(c.name, { size: '8MiB', serializer: 'msgpack', l1Items: 0 }))
    writer.set('k', { bin: Buffer.from([1, 2]), when: new Date(0) })
    // The first get reads the segment (and keeps the bytes in L1), the next are L1 hits.
    for (let i = 0; i < 3; i++) {
      const v = c.get('k')
      assert.deepEqual(v.bin, Buffer.from([1, 2]), `read ${i}`)
      assert.equal(v.when.getTime(), 0)
      v.bin[0] = 9
      v.when.setTime(1)
    }
  })

  test('concurrent getOrSet calls of one key each get their own object', async () => {
    for (const [copy, same] of [
      ['decode', false],
      ['shared', true],
    ]) {
      const c = cache(`flight-${copy}`, { copy })
      let loads = 0
      const loader = async () => {
        loads++
        await new Promise((r) => setTimeout(r, 20))
        return post()
      }
      const [a, b] = await Promise.all([c.getOrSet('k', loader), c.getOrSet('k', loader)])
      assert.equal(loads, 1)
      assert.equal(a === b, same, copy)
      assert.deepEqual(b, FRESH)
    }
  })
})

describe("copy: 'decode' across processes", () => {
  const names = removedAfter()
  for (const lang of ['node', 'python']) {
    const who = lang === 'node' ? 'Node.js' : 'Python'
    test(`a value written by a ${who} process, changed after get, reads back unchanged`, async () => {
      const name = cacheName(`copy-${lang}`)
      names.push(name)
      const c = cache.keep(new Cache(name, { size: '16MiB', copy: 'decode' }))
      const w = await agent(lang, name)
      try {
        await w.call({ op: 'set', key: 'k', value: post() })
        for (let i = 0; i < 3; i++) {
          // The first read is below L1 (the other process wrote), the next are L1 hits.
          const v = c.get('k')
          assert.deepEqual(v, FRESH, `read ${i}`)
          mutate(v)
        }
        assert.ok(c.stats().l1.hits >= 2)
        assert.deepEqual(await w.call({ op: 'get', key: 'k' }), FRESH, 'the writer reads it unchanged')
      } finally {
        await w.close()
      }
    })
  }
})

describe('the copy option', () => {
  test("a copy the Cache does not know is a RangeError naming new Cache() and copy, and creates no file", () => {
    const d = mkdtempSync('/dev/shm/zignodecopy-')
    after(() => rmSync(d, { recursive: true, force: true }))
    const name = cacheName('badcopy')
    assert.throws(
      () => new Cache(name, { directory: d, size: '8MiB', copy: 'deep' }),
      (e) => {
        assert.ok(e instanceof RangeError, String(e))
        assert.equal(e.message, `new Cache(): copy must be 'shared', 'copy' or 'decode', got "deep"`)
        return true
      },
    )
    assert.throws(() => new Cache(name, { directory: d, size: '8MiB', copy: true }), {
      name: 'TypeError',
      message: /^new Cache\(\): copy must be a string/,
    })
    assert.deepEqual(readdirSync(d), [])
  })
})

describe("copy: 'decode' without the segment (degraded: 'local')", () => {
  const base = mkdtempSync(join(tmpdir(), 'ziggurat-copy-'))
  after(() => rmSync(base, { recursive: true, force: true }))

  /** A cache whose directory does not exist: it runs on this process's own store. */
  function local(copy, serializer = 'auto') {
    const directory = join(base, 'missing')
    const c = new Cache(cacheName('local'), { directory, degraded: 'local', degradedTtl: 60, copy, serializer })
    after(() => c.close())
    assert.equal(c.degraded, true)
    return c
  }

  for (const [copy, seen] of [
    ['decode', false],
    ['shared', true],
  ]) {
    test(`'${copy}': a deep change after get or getOrSet is ${seen ? '' : 'not '}seen by the next get`, async () => {
      const c = local(copy)
      c.set('k', post())
      mutate(c.get('k'))
      assert.equal(c.get('k').meta.author.name === 'changed', seen, 'after get')
      mutate(await c.getOrSet('g', () => post()))
      assert.equal(c.get('g').meta.author.name === 'changed', seen, 'after the loader')
      c.set('b', Buffer.from([1]))
      c.get('b')[0] = 9
      assert.equal(c.get('b')[0] === 9, seen, 'a Buffer')
    })
  }

  test("'decode' with serializer 'msgpack': a nested Buffer and a Date come back new each hit", () => {
    const c = local('decode', 'msgpack')
    c.set('k', { bin: Buffer.from([1]), when: new Date(0) })
    const v = c.get('k')
    v.bin[0] = 9
    v.when.setTime(5)
    assert.deepEqual(c.get('k'), { bin: Buffer.from([1]), when: new Date(0) })
  })
})
