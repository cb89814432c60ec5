// The messages of the errors, in this package's words: its option names (negTtl,
// loaderTimeout), Infinity, JavaScript's numbers, and the public method's name;
// never Python's spellings (neg_ttl, math.inf, recreate=True, `ziggurat rm`).
import assert from 'node:assert/strict'
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { Cache, LoadTimeoutError, SegmentError, ZigguratError } from 'ziggurat'
import { agent, cacheName, opener } from './agents.mjs'

const cache = opener()
const base = mkdtempSync(join(tmpdir(), 'ziggurat-errors-'))
after(() => rmSync(base, { recursive: true, force: true }))

const PYTHON_WORDS = /math\.inf|=True|=False|neg_ttl|stale_ttl|loader_timeout|lock_timeout|avg_item_size|group=|ziggurat rm|\*\*/

/** The error `f` throws, checked to be of `Class`, its message matching `message`. */
function thrown(f, Class, message) {
  let err
  assert.throws(f, (e) => {
    err = e
    return true
  })
  assert.ok(err instanceof Class, `${err?.name}: ${err?.message}`)
  assert.match(err.message, message)
  assert.doesNotMatch(err.message, PYTHON_WORDS)
  return err
}

describe('arguments out of range', () => {
  test('a wrong ttl names the method and the argument, with Infinity for never', () => {
    const c = cache('err-ttl')
    thrown(
      () => c.set('k', 1, { ttl: -1 }),
      RangeError,
      /^Cache\.set\(\): ttl must be a number of seconds > 0 \(or Infinity for never\), got -1$/,
    )
    thrown(
      () => c.set('k', 1, { ttl: 1e12 }),
      RangeError,
      /^Cache\.set\(\): ttl must be at most 100 years \(3153600000 s\) or Infinity for never, got 1000000000000$/,
    )
    thrown(() => c.touch('k', { ttl: Number.NaN }), RangeError, /^Cache\.touch\(\): ttl must be .* got NaN$/)
    c.set('k', 1, { ttl: Infinity })
    assert.equal(c.get('k'), 1)
  })

  test('negTtl, loaderTimeout and jitter are named as this API names them', () => {
    const name = cacheName('err-opts')
    thrown(
      () => new Cache(name, { negTtl: 0 }),
      RangeError,
      /^new Cache\(\): negTtl must be a number of seconds > 0 \(or Infinity for never\), got 0$/,
    )
    thrown(() => new Cache(name, { loaderTimeout: -2 }), RangeError, /^new Cache\(\): loaderTimeout must be .* got -2$/)
    thrown(() => new Cache(name, { negTtl: 'soon' }), RangeError, /^new Cache\(\): negTtl: cannot read duration "soon"/)
    thrown(() => new Cache(name, { jitter: 2 }), RangeError, /^new Cache\(\): jitter must be in \[0, 1\), got 2$/)
    thrown(() => new Cache(name, { lockTimeout: 0 }), RangeError, /^new Cache\(\): lockTimeout must be .* got 0$/)
    thrown(
      () => new Cache(name, { avgItemSize: 8 }),
      RangeError,
      /^new Cache\(\): avgItemSize must be between 32 and 16777216 bytes, got 8$/,
    )
    thrown(() => new Cache(name, { negSize: '12 parsecs' }), RangeError, /negSize: cannot read size "12 parsecs"/)
  })

  test("getOrSet's negTtl and a namespace's prefix", async () => {
    const c = cache('err-gos')
    await assert.rejects(
      c.getOrSet('k', () => 1, { negTtl: -1 }),
      (e) => e instanceof RangeError && /^Cache\.getOrSet\(\): negTtl must be .* got -1$/.test(e.message),
    )
    thrown(
      () => c.namespace('a:b'),
      RangeError,
      /^Cache\.namespace\(\): prefix must be a non-empty string without ':', got "a:b"$/,
    )
  })
})

describe('incr overflow', () => {
  const MESSAGE = /^Cache\.incr\(\): the counter "n" would leave the signed 64-bit range$/

  test('the segment and the store without it say the same', () => {
    const c = cache('err-incr')
    c.set('n', 2n ** 63n - 1n)
    thrown(() => c.incr('n', 1), RangeError, MESSAGE)
    const local = new Cache(cacheName('err-incr-local'), {
      directory: join(base, 'missing'),
      degraded: 'local',
    })
    try {
      assert.equal(local.degraded, true)
      local.set('n', 2n ** 63n - 1n)
      thrown(() => local.incr('n', 1), RangeError, MESSAGE)
    } finally {
      local.close()
    }
  })
})

describe('LoadTimeoutError', () => {
  test('is a ZigguratError', () => {
    const e = new LoadTimeoutError('x')
    assert.ok(e instanceof ZigguratError && e instanceof Error)
    assert.equal(e.name, 'LoadTimeoutError')
  })

  test("a loader slower than loaderTimeout: its signal's reason names the key and the cache", async () => {
    const c = cache('err-slow', { loaderTimeout: 0.05 })
    let reason
    await c.getOrSet('slow', ({ signal }) =>
      new Promise((r) => signal.addEventListener('abort', () => { reason = signal.reason; r('late') })),
    )
    assert.ok(reason instanceof LoadTimeoutError && reason instanceof ZigguratError)
    assert.match(
      reason.message,
      new RegExp(`^Cache\\.getOrSet\\(\\): the loader of "slow" did not finish within loaderTimeout \\(0\\.05 s\\) \\(cache "${c.name}"\\)$`),
    )
  })

  test("a wait longer than loaderTimeout (another process's load) names the key and the cache", async () => {
    const name = cacheName('err-wait')
    const other = await agent('node', name)
    try {
      const c = cache.keep(new Cache(name, { size: '16MiB', loaderTimeout: 0.2 }))
      const loading = other.call({ op: 'getOrSet', key: 'slow', ms: 1500, value: 'late' })
      while (c.get('loads:slow') !== 1) await new Promise((r) => setTimeout(r, 5))
      await assert.rejects(c.getOrSet('slow', () => 'mine'), (e) => {
        assert.ok(e instanceof LoadTimeoutError && e instanceof ZigguratError, String(e))
        assert.equal(
          e.message,
          `Cache.getOrSet(): another caller's load of "slow" did not finish within loaderTimeout (0.2 s) (cache "${name}")`,
        )
        return true
      })
      assert.equal(await loading, 'late')
    } finally {
      await other.close()
    }
  })
})

describe('segment errors', () => {
  test('a damaged file is refused in this API words', () => {
    const directory = mkdtempSync(join(base, 'damaged-'))
    const name = cacheName('err-damaged')
    new Cache(name, { size: '8MiB', directory }).close()
    for (const f of readdirSync(directory).filter((f) => !f.includes('.neg'))) {
      const fd = openSync(join(directory, f), 'r+')
      writeSync(fd, Buffer.alloc(4096, 0xde), 0, 4096, 0)
      closeSync(fd)
    }
    const e = thrown(
      () => new Cache(name, { size: '8MiB', directory, degraded: 'raise' }),
      SegmentError,
      /Open it with recreate: true to replace it/,
    )
    assert.ok(e instanceof ZigguratError)
  })
})
