// Reads below L1 of string keys: each cache's own values, whatever the key's
// length (keys of up to 1365 UTF-16 units go through the input block, longer
// ones through a method call) and whatever the text (ASCII JSON becomes a
// one-byte string, other text UTF-8), and a closed cache's slot handed on.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { after, test } from 'node:test'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Cache, ZigguratError } from 'ziggurat'
import { cacheName, opener } from './agents.mjs'

const cache = opener({ l1Items: 0 })

const keys = [
  'k',
  'user:1',
  'naïve:1', // short, not ASCII
  '🎉',
  'x'.repeat(32),
  'y'.repeat(33),
  'é'.repeat(1365), // 2730 bytes through the input block
  '€'.repeat(1365), // 4095 bytes, the input block's most
  '€'.repeat(1365) + '!', // 1366 units: a method call
  'x'.repeat(4096), // the longest key
]
const value = (tag, i) => ({ tag, i, ascii: 'plain', text: i % 2 ? 'naïve ✓ 🎉' : 'plain' })

test('two caches read interleaved each return their own values, for every key length', () => {
  const a = cache('reads-a')
  const b = cache('reads-b')
  keys.forEach((k, i) => {
    a.set(k, value('a', i))
    b.set(k, value('b', i))
  })
  for (let round = 0; round < 3; round++) {
    keys.forEach((k, i) => {
      assert.deepEqual(a.get(k), value('a', i), `a, key of ${k.length} units`)
      assert.deepEqual(b.get(k), value('b', i), `b, key of ${k.length} units`)
    })
  }
  assert.equal(a.stats().l2.hits, 3 * keys.length)
  assert.equal(b.get('absent'), undefined)
  a.set('s', 'naïve')
  a.set('n', 7)
  a.set('buf', Buffer.from([0, 255]))
  assert.equal(a.get('s'), 'naïve')
  assert.equal(a.get('n'), 7)
  assert.deepEqual(a.get('buf'), Buffer.from([0, 255]))
})

test('a key of no bytes or of more than 4096 bytes is a RangeError naming the method', () => {
  const a = cache('reads-range')
  assert.throws(() => a.get(''), (e) => e instanceof RangeError && e.message.startsWith('Cache.get()'))
  assert.throws(() => a.get('x'.repeat(4097)), (e) => e instanceof RangeError && e.message.startsWith('Cache.get()'))
  assert.throws(() => a.has('é'.repeat(2049)), (e) => e instanceof RangeError && e.message.startsWith('Cache.has()'))
})

test("a closed cache's slot goes to the next cache opened, which reads its own values", () => {
  const a = cache('reads-closed')
  const b = cache('reads-open')
  a.set('k', 'from a')
  b.set('k', 'from b')
  assert.equal(a.get('k'), 'from a')
  a.close()
  assert.equal(b.get('k'), 'from b', 'closing a leaves the cache opened after it readable')
  const c = cache('reads-next')
  c.set('k', 'from c')
  assert.equal(c.get('k'), 'from c')
  assert.throws(() => a.get('k'), ZigguratError)
  const again = new Cache(a.name, { l1Items: 0 })
  cache.keep(again)
  assert.equal(again.get('k'), 'from a')
  assert.equal(c.get('k'), 'from c')
  assert.equal(b.get('k'), 'from b')
})

test('L1 keeps a value until its deadline, near (one clock word) or beyond 49.7 days (two)', async () => {
  const c = new Cache(cacheName('reads-l1-clock'), { size: '8MiB' })
  cache.keep(c)
  c.set('near', 'n', { ttl: '400ms' }) // long enough to be read at once on a loaded machine
  c.set('far', 'f', { ttl: '100d' })
  c.set('never', 'v', { ttl: Infinity })
  const hits = () => c.stats().l1.hits
  const h0 = hits()
  assert.equal(c.get('near'), 'n')
  assert.equal(c.get('far'), 'f')
  assert.equal(c.get('never'), 'v')
  assert.equal(hits(), h0 + 3, 'the three are L1 hits')
  await new Promise((r) => setTimeout(r, 500))
  assert.equal(c.get('near'), undefined)
  assert.equal(c.get('far'), 'f')
  assert.equal(c.get('never'), 'v')
  assert.equal(hits(), h0 + 5, 'the far and never-expiring values are still L1 hits')
})

test('a full L1 drops the entry kept longest ago and not hit since, a rewritten one keeping its place', () => {
  const c = new Cache(cacheName('reads-evict'), { size: '8MiB', l1Items: 3 })
  cache.keep(c)
  for (const k of ['a', 'b', 'c']) c.set(k, k)
  c.set('a', 'a2') // a keeps its place, first in the queue
  c.get('a') // but a hit gives it a second chance
  c.set('d', 'd') // so b goes
  assert.equal(c.stats().l1.items, 3)
  const l1Hit = (k) => {
    const before = c.stats().l1.hits
    c.get(k)
    return c.stats().l1.hits === before + 1
  }
  assert.equal(l1Hit('a'), true)
  assert.equal(l1Hit('c'), true)
  assert.equal(l1Hit('d'), true)
  assert.equal(c.get('b'), 'b', 'b is read from the segment')
  // Many more keys than the L1 holds: it stays at its bound, each value correct.
  for (let i = 0; i < 5000; i++) c.set(`k${i}`, i)
  for (let i = 0; i < 5000; i += 97) assert.equal(c.get(`k${i}`), i)
  assert.equal(c.stats().l1.items, 3)
})

// A read copies the value into one scratch area per thread, reused by every
// read, and makes the JavaScript value from it: a long value and then a short
// one, each kind, and each size a read copies in one piece or in two.
test('values read back whole through the reused scratch: up to the size limit, then shorter ones', () => {
  const c = cache('reads-scratch')
  const limit = c.stats().host.max_value_size
  // The longest ASCII string the segment takes: the JSON text's quotes and the
  // entry's trailer come on top of the characters.
  let longest = null
  for (let n = limit - 2; n > limit - 64 && longest === null; n--) {
    try {
      c.set('longest', 'a'.repeat(n - 1) + 'z')
      longest = n
    } catch (e) {
      assert.ok(e instanceof RangeError && /max_value_size/.test(e.message), e.message)
    }
  }
  assert.ok(longest !== null, 'a string within 64 bytes of the limit is stored')
  assert.throws(() => c.set('over', 'a'.repeat(longest + 1)), RangeError)
  const wide = '🎉é✓'.repeat(Math.floor((longest - 16) / 9)) + '🎉' // 4, 2 and 3 bytes of UTF-8 each
  c.set('wide', wide)
  c.set('bytes', Buffer.alloc(longest - 64, 0xab))
  c.set('short', { a: 1 })
  c.set('n', 42)
  c.set('big', 2n ** 60n)
  // Around the size a read copies in one piece (payload and trailer of 256 bytes).
  // And ASCII text with one character beyond ASCII at its end, at every
  // offset a check of eight bytes at a time can leave it.
  const around = []
  for (let n = 220; n < 280; n++) {
    around.push([`s${n}`, 's'.repeat(n)], [`w${n}`, '🎉'.repeat(n >> 2)], [`b${n}`, Buffer.alloc(n, n & 0xff)])
  }
  for (let n = 0; n < 24; n++) around.push([`e${n}`, `${'e'.repeat(n)}é`], [`E${n}`, `${'e'.repeat(n + 240)}🎉`])
  for (const [k, v] of around) c.set(k, v)
  const hits = c.stats().l2.hits
  for (let round = 0; round < 2; round++) {
    const got = c.get('longest')
    assert.equal(got.length, longest, 'the longest value, whole')
    assert.ok(got.endsWith('z') && got.startsWith('aaaa'))
    assert.deepEqual(c.get('short'), { a: 1 }, 'a short value after the longest one: no byte of it left over')
    assert.equal(c.get('wide'), wide, 'characters of 2, 3 and 4 bytes of UTF-8, near the limit')
    assert.equal(c.get('n'), 42)
    assert.deepEqual(c.get('bytes'), Buffer.alloc(longest - 64, 0xab))
    assert.equal(c.get('big'), 2n ** 60n)
    assert.equal(c.get('short').a, 1)
    for (const [k, v] of around) assert.deepEqual(c.get(k), v, k)
  }
  assert.equal(c.stats().l2.hits, hits + 2 * (7 + around.length), 'every read a segment hit')
  assert.equal(c.stats().foreign, 0)
})

test('a key with a lone surrogate is a TypeError naming the method, short or long, and reads nothing', () => {
  const c = cache('reads-surrogate')
  c.set('k', 'v')
  const misses = c.stats().l1.misses
  for (const key of ['\ud800', 'ab\udc00', `${'x'.repeat(40)}\ud800`, `é${'x'.repeat(2000)}\udfff`]) {
    for (const method of ['get', 'has']) {
      assert.throws(
        () => c[method](key),
        (e) => e instanceof TypeError && e.message.startsWith(`Cache.${method}(): key is not valid UTF-8 (lone surrogate`),
        `${method} of a key of ${key.length} units`,
      )
    }
  }
  assert.equal(c.stats().l1.misses, misses, 'no read went below L1')
  assert.equal(c.get('k'), 'v')
})

// The registry of readers holds each open cache; a cache's object collected
// without close() frees its slot (and so the cache), and only its own.
const native = createRequire(import.meta.url)('../lib/native.cjs')
setFlagsFromString('--expose-gc')
const collect = runInNewContext('gc')
async function collected(done) {
  for (let i = 0; i < 50 && !done(); i++) {
    collect()
    await new Promise((r) => setImmediate(r))
  }
  return done()
}

test("a cache collected without close() frees its reader's slot, and only its own", async () => {
  const name = cacheName('reads-dropped')
  const options = { ttl: 300, jitter: 0, loaderTimeout: 10, l1: false }
  let finalized = false
  const registry = new FinalizationRegistry(() => (finalized = true))
  const slot = (() => {
    const dropped = new native.NativeCache(name, options)
    registry.register(dropped, 'dropped')
    return dropped.reader()
  })()
  assert.equal(await collected(() => finalized), true, 'the unclosed cache was collected')
  await new Promise((r) => setImmediate(r))
  const next = new native.NativeCache(name, options)
  assert.equal(next.reader(), slot, 'its slot is free for the next cache')
  assert.equal(next.reader(), slot, 'a cache registers once')
  next.unlink()
  next.close()
  native.forgetReader(slot)

  // A closed cache's slot goes to the next cache opened: collecting the
  // closed one leaves that cache's reads alone.
  let closedGone = false
  const gone = new FinalizationRegistry(() => (closedGone = true))
  ;(() => {
    const closed = new Cache(cacheName('reads-dropped-closed'), { size: '8MiB', l1Items: 0 })
    closed.unlink()
    closed.close()
    gone.register(closed, 'closed')
  })()
  const taker = cache('reads-dropped-taker')
  taker.set('k', 'v')
  assert.equal(await collected(() => closedGone), true, 'the closed cache was collected')
  for (let i = 0; i < 5; i++) await collected(() => false)
  assert.equal(taker.get('k'), 'v', 'the slot the closed cache had still reads for the cache that took it')
})
