// Several real processes on one cache, Node.js and Python: a write that
// returned in one is seen at once by every other, L1 included; one load per
// key among all the callers of getOrSet/fetch; waits leave the event loop free.
import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { after, describe, test } from 'node:test'
import { Cache, LoadTimeoutError } from 'ziggurat'
import { agent, cacheName, removeCache } from './agents.mjs'

const ROUNDS = 2000
const agents = []
const caches = []
const names = new Set()

async function start(lang, name, loaderTimeout) {
  const a = await agent(lang, name, loaderTimeout)
  agents.push(a)
  names.add(name)
  return a
}

function open(name) {
  const c = new Cache(name, { size: '16MiB' })
  caches.push(c)
  return c
}

after(async () => {
  await Promise.all(agents.map((a) => a.close()))
  for (const c of caches) c.close()
  for (const n of names) await removeCache(n)
})

/** `rounds` writes by `writer`, each read at once (twice: L1 too) by `reader`; the stale reads. */
async function coherence(writer, reader, rounds) {
  let stale = 0
  await writer.call({ op: 'set', key: 'k', value: { round: -1 } })
  await reader.call({ op: 'get2', key: 'k' })
  for (let i = 0; i < rounds; i++) {
    const value = i % 3 === 0 ? i : i % 3 === 1 ? { round: i, s: 'x'.repeat(i % 50) } : `r${i}`
    await writer.call({ op: 'set', key: 'k', value })
    const seen = await reader.call({ op: 'get2', key: 'k' })
    if (JSON.stringify(seen) !== JSON.stringify(value)) stale++
  }
  return stale
}

describe('coherence', () => {
  test('Node.js writer, Node.js reader: 0 stale reads', async () => {
    const name = cacheName('coh-nn')
    const [w, r] = [await start('node', name), await start('node', name)]
    assert.equal(await coherence(w, r, ROUNDS), 0)
    const st = await r.call({ op: 'stats' })
    assert.ok(st.l1.hits >= ROUNDS, `the reader's second reads were L1 hits (${st.l1.hits})`)
  })

  test('Node.js writer, Python reader: 0 stale reads', async () => {
    const name = cacheName('coh-np')
    const [w, r] = [await start('node', name), await start('python', name)]
    assert.equal(await coherence(w, r, ROUNDS), 0)
  })

  test('Python writer, Node.js reader: 0 stale reads', async () => {
    const name = cacheName('coh-pn')
    const [w, r] = [await start('python', name), await start('node', name)]
    assert.equal(await coherence(w, r, ROUNDS), 0)
  })

  test('tags, clears, namespaces, incr and add agree across languages', async () => {
    const name = cacheName('agree')
    const [n, p] = [await start('node', name), await start('python', name)]
    for (const [a, b] of [[n, p], [p, n]]) {
      await a.call({ op: 'setTagged', key: 't', value: 'tagged', tags: ['grp'] })
      assert.equal(await b.call({ op: 'get2', key: 't' }), 'tagged')
      await a.call({ op: 'invalidate', tags: ['grp'] })
      assert.equal(await b.call({ op: 'get', key: 't' }), null)

      await b.call({ op: 'set', key: 'c', value: 1 })
      assert.equal(await a.call({ op: 'get2', key: 'c' }), 1)
      await a.call({ op: 'clear' })
      assert.equal(await b.call({ op: 'get', key: 'c' }), null)

      await a.call({ op: 'nsSet', ns: 'users', key: '1', value: 'ada' })
      assert.equal(await b.call({ op: 'nsGet', ns: 'users', key: '1' }), 'ada')
      assert.equal(await b.call({ op: 'get', key: 'users:1' }), 'ada')
      await b.call({ op: 'nsClear', ns: 'users' })
      assert.equal(await a.call({ op: 'nsGet', ns: 'users', key: '1' }), null)

      assert.equal(await a.call({ op: 'incr', key: 'n', delta: 2 }), 2)
      assert.equal(await b.call({ op: 'incr', key: 'n', delta: 3 }), 5)
      assert.equal(await a.call({ op: 'get2', key: 'n' }), 5)

      assert.equal(await a.call({ op: 'add', key: 'once', value: 'first' }), true)
      assert.equal(await b.call({ op: 'add', key: 'once', value: 'second' }), false)
      assert.equal(await b.call({ op: 'get', key: 'once' }), 'first')
      await a.call({ op: 'clear' })
    }
  })

  test('bytes and Buffers, and Python pickles as foreign misses', async () => {
    const name = cacheName('bytes')
    const p = await start('python', name)
    const c = open(name)
    for (const n of [0, 3, 255, 256, 65535, 65536, 70000]) {
      const data = Buffer.alloc(n, n % 251)
      c.set(`b${n}`, data)
      assert.equal(await p.call({ op: 'isBytes', key: `b${n}`, hex: data.toString('hex') }), true, `${n} bytes`)
      await p.call({ op: 'bytes', key: `p${n}`, hex: data.toString('hex') })
      assert.deepEqual(c.get(`p${n}`), data, `${n} bytes from Python`)
    }
    await p.call({ op: 'pickled', key: 'tuple' })
    const before = c.stats().foreign
    assert.equal(c.get('tuple'), undefined)
    assert.equal(c.stats().foreign, before + 1)
    assert.equal(c.has('tuple'), false)
    assert.equal(c.stats().foreign, before + 2)
    // getOrSet loads a key it cannot read, and stores its own value in its place.
    assert.deepEqual(await c.getOrSet('tuple', () => [1, 2]), [1, 2])
    assert.deepEqual(await p.call({ op: 'get', key: 'tuple' }), [1, 2])
  })
})

describe('single flight', () => {
  async function oneLoadPerKey(langs, keys) {
    const name = cacheName(`sf-${langs.join('')}`)
    const workers = []
    for (const l of langs) workers.push(await start(l, name))
    for (const key of keys) {
      const results = await Promise.all(
        workers.map((w) => w.call({ op: 'getOrSet', key, ms: 300, value: { key, by: w.lang } })),
      )
      for (const r of results) assert.deepEqual(r, results[0], `every caller of ${key} got one value`)
      assert.equal(await workers[0].call({ op: 'incr', key: `loads:${key}`, delta: 0 }), 1, `one load of ${key}`)
    }
  }

  test('four Node.js processes: one load per key', async () => {
    await oneLoadPerKey(['node', 'node', 'node', 'node'], ['a', 'b', 'c'])
  })

  test('Node.js and Python processes: one load per key', async () => {
    await oneLoadPerKey(['node', 'python', 'node', 'python'], ['a', 'b', 'c'])
  })

  test("a wait longer than loaderTimeout rejects with LoadTimeoutError", async () => {
    const name = cacheName('sf-timeout')
    const p = await start('python', name)
    const c = new Cache(name, { size: '16MiB', loaderTimeout: 0.3 })
    caches.push(c)
    const loading = p.call({ op: 'getOrSet', key: 'slow', ms: 1500, value: 'late' })
    while (c.get('loads:slow') !== 1) await new Promise((r) => setTimeout(r, 5))
    await assert.rejects(
      c.getOrSet('slow', () => 'from node'),
      (e) => e instanceof LoadTimeoutError && /^Cache\.getOrSet\(\): .*loaderTimeout/.test(e.message),
    )
    assert.equal(await loading, 'late')
    assert.equal(await c.getOrSet('slow', () => 'not called'), 'late')
  })

  test('a cache closed during its load gives the lease back: another process loads at once', async () => {
    const name = cacheName('sf-close')
    // Python waits at most 1 s for a lease holder: a lease left held fails its fetch.
    const p = await start('python', name, 1)
    const c = new Cache(name, { size: '16MiB', loaderTimeout: 30 })
    let release
    const loading = c.getOrSet('k', () => new Promise((r) => (release = r)))
    await new Promise((r) => setTimeout(r, 20))
    c.close()
    release('from node')
    assert.equal(await loading, 'from node')
    assert.equal(await p.call({ op: 'getOrSet', key: 'k', ms: 0, value: 'from python' }), 'from python')
  })

  test("waiting for another process's load leaves the event loop free", async () => {
    const name = cacheName('sf-loop')
    const p = await start('python', name)
    const c = open(name)
    const loading = p.call({ op: 'getOrSet', key: 'slow', ms: 1000, value: 'from python' })
    while (c.get('loads:slow') !== 1) await new Promise((r) => setTimeout(r, 5))
    let ticks = 0
    const timer = setInterval(() => ticks++, 10)
    const v = await c.getOrSet('slow', () => 'from node')
    clearInterval(timer)
    assert.equal(v, 'from python')
    assert.equal(await loading, 'from python')
    assert.equal(c.get('loads:slow'), 1)
    assert.ok(ticks >= 5, `the event loop ran while waiting (${ticks} ticks)`)
    assert.ok(c.stats().waits >= 1)
  })
  test("a wait for another process's load runs on a thread of its own, not libuv's pool", async () => {
    const name = cacheName('sf-thread')
    const p = await start('python', name)
    const c = open(name)
    const loading = p.call({ op: 'getOrSet', key: 'slow', ms: 1500, value: 'from python' })
    while (c.get('loads:slow') !== 1) await new Promise((r) => setTimeout(r, 5))
    const waiting = c.getOrSet('slow', () => 'from node')
    const threads = async () => {
      const names = []
      for (const t of await readdir('/proc/self/task')) {
        names.push((await readFile(`/proc/self/task/${t}/comm`, 'utf8').catch(() => '')).trim())
      }
      return names
    }
    // Each look reads files, which takes a thread of libuv's pool: it completes while
    // the wait lasts.
    let seen = await threads()
    for (let i = 0; i < 100 && !seen.includes('ziggurat-wait'); i++) {
      await new Promise((r) => setTimeout(r, 5))
      seen = await threads()
    }
    assert.ok(seen.includes('ziggurat-wait'), `threads while waiting: ${seen.join(', ')}`)
    assert.equal(await waiting, 'from python')
    assert.equal(await loading, 'from python')
    assert.equal(c.get('loads:slow'), 1)
    assert.ok(!(await threads()).includes('ziggurat-wait'), "the wait's thread ended with it")
  })
})
