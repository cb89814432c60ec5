// The L1's policy: CLOCK eviction (a hot key outlives a scan of cold ones),
// and loaders' cached misses kept for getOrSet (answered without a call
// below L1, yet ended at once by any process's write of the key).
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { Cache } from 'ziggurat'
import { agent, cacheName, opener } from './agents.mjs'

const cache = opener()

/** Whether a get of `k` was answered by L1 (its hit count moved, no read below it). */
function l1Hit(c, k) {
  const before = c.stats()
  c.get(k)
  const now = c.stats()
  return now.l1.hits === before.l1.hits + 1 && now.l1.misses === before.l1.misses
}

test('a hot key outlives a scan of cold keys larger than l1Items', () => {
  const c = cache('l1-clock', { l1Items: 100 })
  c.set('hot', { hot: true })
  let missed = 0
  for (let i = 0; i < 1000; i++) {
    c.set(`cold${i}`, i)
    // Read between cold writes, the hot key is marked whenever the clock
    // reaches it: it never leaves L1 (FIFO would drop it every 100 writes,
    // 10 times). A cold key may share the hot key's stamp word, and its
    // write then ends the hot entry (a read below L1, never a stale one):
    // with 1,000 cold keys, that happens to one of a few runs, once or twice.
    if (!l1Hit(c, 'hot')) missed++
  }
  assert.ok(missed <= 3, `the hot key left L1 ${missed} times`)
  assert.equal(c.stats().l1.items, 100)
  // The cold keys went through L1 in their order: the oldest are out of it.
  assert.equal(l1Hit(c, 'cold0'), false)
  assert.equal(c.get('cold0'), 0, 'read from the segment')
})

test('an entry not hit since it was queued goes first; a rewrite keeps its place', () => {
  const c = cache('l1-second-chance', { l1Items: 3 })
  for (const k of ['a', 'b', 'c']) c.set(k, k)
  c.get('a') // marked: a second chance
  c.set('c', 'c2') // a rewrite keeps c's place in the queue
  c.set('d', 'd') // a goes to the back unmarked, b (first unmarked) goes
  assert.equal(c.stats().l1.items, 3)
  assert.equal(l1Hit(c, 'a'), true)
  assert.equal(l1Hit(c, 'c'), true)
  assert.equal(l1Hit(c, 'd'), true)
  assert.equal(l1Hit(c, 'b'), false)
  assert.equal(c.get('b'), 'b', 'b is read from the segment')
})

test('a cached miss is answered by L1 from the third call, without the loader or a read below L1', async () => {
  const c = cache('l1-neg', { l1Items: 100 })
  let loads = 0
  const loader = async () => {
    loads++
    return null
  }
  assert.equal(await c.getOrSet('gone', loader), undefined)
  // The second call reads the cached miss below L1 and keeps it there.
  assert.equal(await c.getOrSet('gone', loader), undefined)
  const before = c.stats()
  assert.equal(before.l1.negativeItems, 1)
  for (let i = 0; i < 5; i++) assert.equal(await c.getOrSet('gone', loader), undefined)
  const now = c.stats()
  assert.equal(loads, 1)
  assert.equal(now.l1.misses, before.l1.misses, 'no read below L1')
  assert.equal(now.negHits, before.negHits)
  assert.equal(now.l1.hits, before.l1.hits + 5)
  // get() does not look at cached misses (it answers undefined below L1 as before).
  assert.equal(c.get('gone'), undefined)
  assert.equal(c.has('gone'), false)
})

test("another process's set of a cached-miss key is seen at once (stale 0)", async () => {
  const name = cacheName('l1-neg-proc')
  const c = new Cache(name, { size: '8MiB', l1Items: 100 })
  cache.keep(c)
  const w = await agent('node', name)
  try {
    let stale = 0
    for (let i = 0; i < 20; i++) {
      const k = `k${i}`
      for (let j = 0; j < 3; j++) assert.equal(await c.getOrSet(k, () => null), undefined)
      assert.equal(c.stats().l1.negativeItems > 0, true)
      await w.call({ op: 'set', key: k, value: i })
      const v = await c.getOrSet(k, () => 'loaded')
      if (v !== i) stale++
    }
    assert.equal(stale, 0)
  } finally {
    await w.close()
  }
})

test('a write, delete, clear or touch of this process ends the cached miss in L1', async () => {
  const c = cache('l1-neg-own', { l1Items: 100 })
  const miss = async (k) => {
    for (let j = 0; j < 2; j++) await c.getOrSet(k, () => null)
  }
  await miss('a')
  c.set('a', 1)
  assert.equal(await c.getOrSet('a', () => 'x'), 1)
  await miss('b')
  c.clear()
  assert.equal(await c.getOrSet('b', () => 'loaded'), 'loaded')
  await miss('c')
  c.incr('c')
  assert.equal(await c.getOrSet('c', () => 'x'), 1)
  await miss('d')
  c.delete('d')
  assert.equal(await c.getOrSet('d', () => 'loaded'), 'loaded')
})

test('l1NegativeItems bounds the cached misses apart from the values; 0 keeps none', async () => {
  const c = cache('l1-neg-bound', { l1Items: 100, l1NegativeItems: 2 })
  for (const k of ['a', 'b', 'c', 'd']) {
    await c.getOrSet(k, () => null)
    await c.getOrSet(k, () => null)
  }
  const s = c.stats()
  assert.equal(s.l1.negativeItems, 2)
  assert.equal(s.l1.maxNegativeItems, 2)
  assert.equal(s.l1.items, 0)
  const none = cache('l1-neg-none', { l1Items: 100, l1NegativeItems: 0 })
  for (let j = 0; j < 3; j++) await none.getOrSet('a', () => null)
  assert.equal(none.stats().l1.negativeItems, 0)
  // Default: a tenth of l1Items.
  assert.equal(cache('l1-neg-default', { l1Items: 50 }).stats().l1.maxNegativeItems, 5)
})

test('a cached miss with tags is kept in L1, and invalidateTags ends it in any process', async () => {
  const name = cacheName('l1-neg-tags')
  const c = new Cache(name, { size: '8MiB', l1Items: 100 })
  cache.keep(c)
  let loads = 0
  const loader = () => {
    loads++
    return null
  }
  const miss = async () => {
    for (let j = 0; j < 3; j++) assert.equal(await c.getOrSet('t', loader, { tags: ['posts', 'feed'] }), undefined)
  }
  await miss()
  assert.equal(loads, 1)
  assert.equal(c.stats().l1.negativeItems, 1)
  // Answered by L1: no read below it.
  const before = c.stats()
  await miss()
  assert.equal(c.stats().l1.misses, before.l1.misses)
  assert.equal(loads, 1)
  // This process's invalidation of either tag ends it.
  c.invalidateTags('feed')
  assert.equal(await c.getOrSet('t', () => 'loaded', { tags: ['posts'] }), 'loaded')
  c.delete('t')
  await miss()
  assert.equal(loads, 2)
  // So does another process's, Python's included, with no stale answer.
  for (const lang of ['node', 'python']) {
    const w = await agent(lang, name)
    try {
      await miss()
      await w.call({ op: 'invalidate', tags: ['posts'] })
      assert.equal(await c.getOrSet('t', () => `loaded by ${lang}`, { tags: ['posts'] }), `loaded by ${lang}`)
      c.delete('t')
    } finally {
      await w.close()
    }
  }
})

test('l1NegativeItems: a bad value is refused, naming the option', () => {
  for (const [bad, error] of [
    [-1, RangeError],
    [1.5, RangeError],
    [2 ** 32, RangeError],
    ['10', TypeError],
  ]) {
    assert.throws(
      () => new Cache(cacheName('l1-neg-bad'), { size: '8MiB', l1NegativeItems: bad }),
      (e) =>
        e instanceof error &&
        e.message.startsWith('new Cache(): l1NegativeItems must be ') &&
        !e.message.includes('unknown option'),
    )
  }
})
