// The cluster tier from Node.js: a cache opened without `redis` on a segment
// that another process joined to the tier is refused (at open, and at the next
// write of a process that opened it before): a write from it would reach this
// host only. A cache opened with `redis` joins, shares the tier with Python,
// checks its options before it opens anything, and never makes the event loop
// wait on Redis. The promises of the tier itself are the contract suite's
// (tests/contract/test_cluster_contract.py), run by every pair of front ends.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { dirname, join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { Cache, ZigguratError } from 'ziggurat'
import { cacheName, python, redisServer } from './agents.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

async function freePort() {
  const s = createServer()
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  await once(s, 'close')
  return port
}

const JOIN = `
import sys
from ziggurat import Cache
c = Cache(sys.argv[1], size="8MiB", redis=sys.argv[2], secret="s" * 32)
c.set("py", 1)
print("joined", flush=True)
sys.stdin.read()
c.unlink()
c.close()
`

test('a cache joined to the cluster tier by Python is refused, naming the reason', async (t) => {
  const dir = mkdtempSync('/tmp/zignode-redis-')
  const port = await freePort()
  const redis = spawn(redisServer(), ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  })
  t.after(() => {
    redis.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  const name = cacheName('cluster')
  const before = new Cache(name, { size: '8MiB' })
  before.set('node', 1)
  let py
  for (let attempt = 0; ; attempt++) {
    py = spawn(python(), ['-c', JOIN, name, `redis://127.0.0.1:${port}/0`], { stdio: ['pipe', 'pipe', 'inherit'] })
    const [line] = await once(createInterface({ input: py.stdout }), 'line')
    if (line === 'joined') break
    if (attempt > 20) throw new Error('the Python worker did not join')
  }
  try {
    const refused = (e) => e instanceof ZigguratError && /cluster tier/.test(e.message) && /without `redis`/.test(e.message)
    assert.throws(() => new Cache(name, { size: '8MiB' }), refused)
    assert.throws(() => before.set('node', 2), refused)
    assert.throws(() => before.delete('node'), refused)
    assert.throws(() => before.clear(), refused)
    // With the same server and secret, Node.js joins: it reads what Python wrote, and writes.
    const joined = new Cache(name, { size: '8MiB', redis: `redis://127.0.0.1:${port}/0`, secret: 's'.repeat(32) })
    try {
      assert.equal(await joined.get('py'), 1)
      await joined.set('node', 3)
      assert.equal(await joined.get('node'), 3)
    } finally {
      joined.close()
    }
  } finally {
    py.stdin.end()
    await once(py, 'exit')
    before.close()
  }
})

// Joins and does nothing else: with the server paused, the reader neither positions nor
// names the host, and stopping it gives its lease back, so only the join marker is left.
const JOIN_ONLY = `
import json, sys
from ziggurat import Cache
from ziggurat.cluster.tier import W
c = Cache(sys.argv[1], size="8MiB", redis=sys.argv[2], secret="s" * 32)
c._reader.stop()
print(json.dumps([c._tier.core.app_load(w) for w in (W.LEASE, W.SEQ, W.HOST, W.POSITIONED)]), flush=True)
sys.stdin.read()
c.unlink()
c.close()
`

test('a cache is refused as soon as a Python process joined the tier, before any write or connection', async (t) => {
  const dir = mkdtempSync('/tmp/zignode-redis-')
  const port = await freePort()
  const redis = spawn(redisServer(), ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  t.after(() => {
    redis.kill('SIGCONT')
    redis.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  for await (const line of createInterface({ input: redis.stdout })) {
    if (/Ready to accept connections/.test(line)) break
  }
  redis.kill('SIGSTOP')
  const name = cacheName('joined')
  const py = spawn(python(), ['-c', JOIN_ONLY, name, `redis://127.0.0.1:${port}/0`], { stdio: ['pipe', 'pipe', 'inherit'] })
  try {
    const [line] = await once(createInterface({ input: py.stdout }), 'line')
    // None of the words the tier sets in use is set: only the join marker says it joined.
    assert.deepEqual(JSON.parse(line), [0, 0, 0, 0])
    assert.throws(
      () => new Cache(name, { size: '8MiB' }),
      (e) => e instanceof ZigguratError && /cluster tier/.test(e.message),
    )
  } finally {
    redis.kill('SIGCONT')
    py.stdin.end()
    await once(py, 'exit')
  }
})

test('the tier options are checked before any file is made, naming the option', () => {
  const dir = mkdtempSync('/tmp/zignode-opts-')
  try {
    const name = cacheName('opts')
    const url = 'redis://127.0.0.1:1/0'
    const secret = 'a-secret-of-enough-bytes'
    const cases = [
      [{ redis: url }, TypeError, /secret is required with redis/],
      [{ secret }, TypeError, /secret is only used with redis/],
      [{ redis: 5, secret }, TypeError, /redis must be a redis:\/\/, rediss:\/\/ or unix:\/\/ URL/],
      [{ redis: url, secret: 'short' }, RangeError, /secret must be at least 16 bytes/],
      [{ redis: url, secret: [secret, 7] }, TypeError, /secret must be a string, a Buffer/],
      [{ redis: url, secret, redisTimeout: 0 }, RangeError, /redisTimeout/],
      [{ redis: url, secret, redisTimeout: '2m' }, RangeError, /redisTimeout must be seconds in \(0, 60\]/],
      [{ redis: url, secret, streamLength: 10 }, RangeError, /streamLength must be a whole number >= 100/],
      [{ redis: url, secret, clusterSingleFlight: 'yes' }, TypeError, /clusterSingleFlight must be true or false/],
      [{ redis: 'http://x', secret }, RangeError, /http:\/\/x/],
      [{ redis: 'redis://:hunter2@h:99999/0', secret }, RangeError, /port/],
    ]
    for (const [options, cls, re] of cases) {
      assert.throws(
        () => new Cache(name, { directory: dir, size: '8MiB', ...options }),
        (e) => e instanceof cls && /^new Cache\(\)/.test(e.message) && re.test(e.message) && !/hunter2/.test(e.message),
        JSON.stringify(options),
      )
    }
    assert.deepEqual(readdirSync(dir), [], 'nothing was created')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a slow Redis leaves the event loop running: every call waits on a thread of its own', async (t) => {
  const dir = mkdtempSync('/tmp/zignode-slow-')
  const port = await freePort()
  const redis = spawn(redisServer(), ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  // Every reply of the server reaches the caches 300 ms late.
  const proxy = spawn(python(), [join(root, 'tests', 'delay_proxy.py'), String(port), '300'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  t.after(() => {
    proxy.stdin.end()
    redis.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  for await (const line of createInterface({ input: redis.stdout })) {
    if (/Ready to accept connections/.test(line)) break
  }
  const [line] = await once(createInterface({ input: proxy.stdout }), 'line')
  const name = cacheName('slow')
  const open = (host) => {
    mkdirSync(join(dir, host))
    return new Cache(name, {
      size: '8MiB',
      directory: join(dir, host),
      redis: `redis://127.0.0.1:${line.trim()}/0`,
      secret: 'a-secret-of-enough-bytes',
      redisTimeout: 2,
    })
  }
  const a = open('a')
  const b = open('b')
  try {
    let ticks = 0
    let gap = 0
    let last = performance.now()
    const timer = setInterval(() => {
      const now = performance.now()
      gap = Math.max(gap, now - last)
      last = now
      ticks++
    }, 5)
    const t0 = performance.now()
    await a.set('k', { v: 1 })
    const [got, loaded] = await Promise.all([b.get('k'), b.getOrSet('z', async () => 'z')])
    const took = performance.now() - t0
    clearInterval(timer)
    assert.deepEqual(got, { v: 1 })
    assert.equal(loaded, 'z')
    assert.ok(took >= 600, `the calls waited for the slow server (${took} ms)`)
    // A loop blocked for one reply would show a gap of 300 ms or more.
    assert.ok(gap < 150, `the longest gap between ticks was ${gap} ms`)
    assert.ok(ticks >= 20, `${ticks} ticks`)
  } finally {
    a.close()
    b.close()
  }
})

test('a cache whose segment cannot be used does not join the tier, and says so', async () => {
  const warnings = []
  const c = new Cache(cacheName('nojoin'), {
    directory: '/missing-directory-of-ziggurat',
    degraded: 'local',
    redis: 'redis://127.0.0.1:1/0',
    secret: 'a-secret-of-enough-bytes',
    onWarning: (w) => warnings.push(w.message),
  })
  try {
    assert.equal(c.degraded, true)
    assert.ok(warnings.some((m) => /no shared segment, so no cluster tier either/.test(m)), warnings.join('\n'))
    await c.set('k', 1)
    assert.equal(await c.get('k'), 1)
    assert.equal(c.stats().l3, undefined)
  } finally {
    c.close()
  }
})

test('the HTTP response cache refuses a cache joined to the tier, naming the remedy', async () => {
  const { HttpCache } = await import('ziggurat/http')
  const c = new Cache(cacheName('httpjoin'), { size: '8MiB', redis: 'redis://127.0.0.1:1/0', secret: 'a-secret-of-enough-bytes', redisTimeout: 0.05 })
  try {
    assert.throws(() => new HttpCache(c), (e) => e instanceof TypeError && /joined to the cluster tier/.test(e.message) && /without redis/.test(e.message))
  } finally {
    c.close()
  }
})

test('the Keyv adapter drives a cache joined to the tier', async (t) => {
  const dir = mkdtempSync('/tmp/zignode-keyv-')
  const port = await freePort()
  const redis = spawn(redisServer(), ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  t.after(() => {
    redis.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  for await (const line of createInterface({ input: redis.stdout })) {
    if (/Ready to accept connections/.test(line)) break
  }
  const { KeyvZiggurat } = await import('ziggurat/keyv')
  const c = new Cache(cacheName('keyvjoin'), { size: '8MiB', redis: `redis://127.0.0.1:${port}/0`, secret: 'a-secret-of-enough-bytes' })
  const store = new KeyvZiggurat(c)
  try {
    assert.equal(await store.set('keyv:a', '{"value":1}', 60_000), true)
    assert.equal(await store.get('keyv:a'), '{"value":1}')
    assert.deepEqual(await store.getMany(['keyv:a', 'keyv:b']), ['{"value":1}', undefined])
    assert.equal(await store.deleteMany(['keyv:a']), true)
    assert.equal(await store.get('keyv:a'), undefined)
    await store.set('keyv:c', '1')
    await store.clear()
    assert.equal(await store.get('keyv:c'), undefined)
  } finally {
    c.close()
  }
})
