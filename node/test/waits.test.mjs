// Many waits at once for loads another process holds: the process's thread
// count stays small (a few waits sleep on a thread each, the rest are watched
// by one), and every wait ends when its load lands.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { after, test } from 'node:test'
import { Cache, LoadTimeoutError } from 'ziggurat'
import { cacheName, removedAfter } from './agents.mjs'

const KEYS = 500
const names = removedAfter()
const caches = []
after(() => {
  for (const c of caches) c.close()
})

/** This process's thread count, from /proc/self/status. */
function threads() {
  return Number(/^Threads:\s+(\d+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))[1])
}

/**
 * A process that runs getOrSet for `keys` on cache `name` with loaders that
 * wait until told to go on. Keys share the host's lease cells, so it loads
 * some (its lease, or beside one of its own) and waits for itself on the
 * others, holding every cell any of the keys maps to. Resolves once those
 * loads started, with the keys it loads and a function that lets the loads
 * land (each key's value `from holder: <key>`) and resolves with the keys whose
 * value it stored. A landing is refused when a write of the key's stamp word
 * came during its load, and keys share stamp words: the holder's own landing
 * of another key can refuse it (a load more, never a stale value), so the
 * waits are checked against what the holder stored.
 */
async function holder(name, keys) {
  const script = `
const { Cache } = require('ziggurat')
const { createInterface } = require('node:readline')
const cache = new Cache(process.argv[1], { size: '16MiB', loaderTimeout: 60 })
let go
const landing = new Promise((r) => (go = r))
const loading = []
const loads = JSON.parse(process.argv[2]).map((k) =>
  cache.getOrSet(k, async () => {
    loading.push(k)
    await landing
    return 'from holder: ' + k
  }),
)
setTimeout(() => console.log(JSON.stringify(loading)), 100)
createInterface({ input: process.stdin }).once('line', async () => {
  go()
  await Promise.all(loads)
  const stored = loading.filter((k) => cache.get(k) === 'from holder: ' + k)
  console.log('landed ' + JSON.stringify(stored))
  cache.close()
  process.exit(0)
})
`
  const p = spawn(process.execPath, ['-e', script, name, JSON.stringify(keys)], {
    cwd: new URL('.', import.meta.url),
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]()
  const loading = JSON.parse((await lines.next()).value)
  return {
    loading,
    land: async () => {
      p.stdin.write('go\n')
      const line = (await lines.next()).value
      assert.match(line, /^landed /)
      return JSON.parse(line.slice('landed '.length))
    },
    kill: () => p.kill(),
  }
}

test(`${KEYS} waits at once for another process's loads keep the thread count small, and all end as the loads land`, async (t) => {
  const name = cacheName('waits')
  names.push(name)
  const keys = Array.from({ length: KEYS }, (_, i) => `k${i}`)
  const h = await holder(name, keys)
  try {
    const c = new Cache(name, { size: '16MiB', loaderTimeout: 60 })
    caches.push(c)
    const base = threads()
    let landed = false
    let early = 0
    const waits = keys.map((k) =>
      c.getOrSet(k, () => {
        if (!landed) early++
        return 'from waiter'
      }),
    )
    // Several slices of every wait (250 ms each), sampled.
    let most = base
    const until = performance.now() + 700
    while (performance.now() < until) {
      most = Math.max(most, threads())
      await new Promise((r) => setTimeout(r, 10))
    }
    const t0 = performance.now()
    landed = true
    // The keys the holder was loading when the waits began, and stored.
    const stored = (await h.land()).filter((k) => h.loading.includes(k))
    const got = await Promise.all(waits)
    const ms = performance.now() - t0
    t.diagnostic(
      `threads: ${base} before, ${most} at most while waiting; the waits ended ${ms.toFixed(0)} ms after the loads landed; ` +
        `the holder stored ${stored.length} of its ${h.loading.length} loads`,
    )
    assert.equal(early, 0, 'every key waited for the holder')
    assert.ok(most - base <= 16, `threads while waiting: ${most}, ${base} before`)
    // A key the holder loads answers its wait here; the keys it waited for
    // itself are loaded afterwards, by it or by this process.
    assert.ok(h.loading.length > 100, `the holder loads ${h.loading.length} keys`)
    assert.ok(stored.length > h.loading.length / 2, `the holder stored ${stored.length} of ${h.loading.length}`)
    for (const k of stored) assert.equal(got[keys.indexOf(k)], `from holder: ${k}`, k)
    for (const [i, v] of got.entries()) assert.ok(v === `from holder: ${keys[i]}` || v === 'from waiter', v)
    assert.ok(ms < 5000, `the waits ended ${ms.toFixed(0)} ms after the loads landed`)
  } finally {
    h.kill()
  }
})

test('waits beyond the ones on threads of their own still end at loaderTimeout', async () => {
  const name = cacheName('waits-timeout')
  names.push(name)
  const keys = Array.from({ length: 50 }, (_, i) => `t${i}`)
  const h = await holder(name, keys)
  try {
    const c = new Cache(name, { size: '16MiB', loaderTimeout: 0.5 })
    caches.push(c)
    const t0 = performance.now()
    const ends = await Promise.allSettled(keys.map((k) => c.getOrSet(k, () => 'from waiter')))
    const ms = performance.now() - t0
    for (const e of ends) {
      assert.equal(e.status, 'rejected')
      assert.ok(e.reason instanceof LoadTimeoutError, String(e.reason))
    }
    assert.ok(ms >= 450 && ms < 3000, `rejected after ${ms.toFixed(0)} ms`)
    await h.land()
  } finally {
    h.kill()
  }
})
