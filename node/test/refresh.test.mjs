// getOrSet's early refresh (refreshAhead) and the segment options recreate,
// group and lockTimeout: a hit late in its value's life answers at once with
// that value and reloads it in the background, once per host, whatever the
// language of the callers.
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { after, describe, test } from 'node:test'
import { Cache, SegmentError } from 'ziggurat'
import { cacheName, python } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const run = promisify(execFile)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const open = []
function cache(name, options) {
  const c = new Cache(name, { size: '8MiB', ...options })
  open.push(c)
  return c
}
after(() => {
  for (const c of open) {
    try {
      c.unlink()
    } catch {}
    c.close()
  }
})

/** A loader that counts its calls and resolves with `value` once `release()` is called. */
function gated(value) {
  let release
  const gate = new Promise((r) => (release = r))
  const l = async () => {
    l.calls++
    await gate
    return value
  }
  l.calls = 0
  l.release = release
  return l
}

/** Waits until `get()` returns something other than `old` (at most 5 s); what it returned. */
async function changed(get, old) {
  for (let i = 0; i < 500; i++) {
    const v = get()
    if (v !== old) return v
    await sleep(10)
  }
  return get()
}

// ttl 2 s, refresh in its last half: 1.2 s after a load, a hit is in the window.
const OPTIONS = { ttl: 2, refreshAhead: 0.5, jitter: 0 }

describe('refreshAhead', () => {
  test('a hit in the window returns the old value at once and reloads it in the background', async () => {
    const c = cache(cacheName('refresh'), OPTIONS)
    assert.equal(await c.getOrSet('k', () => 'v1'), 'v1')
    const early = gated('unused')
    assert.equal(await c.getOrSet('k', early), 'v1')
    assert.equal(early.calls, 0, 'a hit before the window does not reload')
    await sleep(1200)
    const load = gated('v2')
    // The loader has not returned, yet the call resolves with the value it replaces.
    assert.equal(await c.getOrSet('k', load), 'v1')
    assert.equal(load.calls, 1)
    // Hits while the refresh runs start no other.
    const again = gated('v3')
    assert.equal(await c.getOrSet('k', again), 'v1')
    assert.equal(again.calls, 0)
    load.release()
    assert.equal(await changed(() => c.get('k'), 'v1'), 'v2')
    assert.equal(again.calls, 0)
  })

  test('a value read from the segment (no L1) in the window is refreshed too', async () => {
    const c = cache(cacheName('refresh-l2'), { ...OPTIONS, l1Items: 0 })
    c.set('k', 'old', { ttl: 2 })
    await sleep(1200)
    const load = gated('new')
    assert.equal(await c.getOrSet('k', load), 'old')
    assert.equal(load.calls, 1)
    load.release()
    assert.equal(await changed(() => c.get('k'), 'old'), 'new')
  })

  test('without refreshAhead a hit in the last part of a life does not reload', async () => {
    const c = cache(cacheName('refresh-off'), { ttl: 2, jitter: 0 })
    c.set('k', 'v1')
    await sleep(1200)
    const load = gated('v2')
    assert.equal(await c.getOrSet('k', load), 'v1')
    assert.equal(load.calls, 0)
  })

  test('once per host: other processes, in Node.js and Python, hitting in the window do not reload', async () => {
    const name = cacheName('refresh-host')
    const c = cache(name, OPTIONS)
    assert.equal(await c.getOrSet('k', () => 'v1'), 'v1')
    await sleep(1200)
    const load = gated('v2')
    assert.equal(await c.getOrSet('k', load), 'v1')
    assert.equal(load.calls, 1)
    // This process holds the key's refresh lease until its loader returns.
    const node = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { Cache } from 'ziggurat'
         const c = new Cache(${JSON.stringify(name)}, { size: '8MiB', ttl: 2, refreshAhead: 0.5, jitter: 0 })
         let calls = 0
         const v = await c.getOrSet('k', () => { calls++; return 'node' })
         await new Promise((r) => setTimeout(r, 100))
         console.log(JSON.stringify({ v, calls }))
         c.close()`,
      ],
      { cwd: here },
    )
    assert.deepEqual(JSON.parse(node.stdout), { v: 'v1', calls: 0 })
    const py = await run(python(), [
      '-c',
      `import json, sys, time
from ziggurat import Cache
c = Cache(sys.argv[1], "8MiB", ttl=2, refresh_ahead=0.5, jitter=0)
calls = []
v = c.fetch("k", lambda: calls.append(1) or "python")
time.sleep(0.1)
print(json.dumps({"v": v, "calls": len(calls)}))
c.close()`,
      name,
    ])
    assert.deepEqual(JSON.parse(py.stdout), { v: 'v1', calls: 0 })
    load.release()
    assert.equal(await changed(() => c.get('k'), 'v1'), 'v2')
  })

  test('a refresh that fails keeps the value and lets a later hit refresh again', async () => {
    const c = cache(cacheName('refresh-fail'), OPTIONS)
    assert.equal(await c.getOrSet('k', () => 'v1'), 'v1')
    await sleep(1200)
    let failed = 0
    assert.equal(
      await c.getOrSet('k', async () => {
        failed++
        throw new Error('source down')
      }),
      'v1',
    )
    await sleep(50)
    assert.equal(failed, 1)
    assert.equal(c.get('k'), 'v1')
    const load = gated('v2')
    load.release()
    assert.equal(await c.getOrSet('k', load), 'v1')
    assert.equal(load.calls, 1)
    assert.equal(await changed(() => c.get('k'), 'v1'), 'v2')
  })
})

describe('segment options', () => {
  /** A private directory, removed after the test. */
  function directory() {
    const d = mkdtempSync('/dev/shm/zignoderefresh-')
    after(() => rmSync(d, { recursive: true, force: true }))
    return d
  }

  test('bad refreshAhead, recreate, group and lockTimeout are refused, naming the option, and create no file', () => {
    const d = directory()
    const name = cacheName('opts')
    const bad = [
      [{ refreshAhead: 1 }, RangeError, /new Cache\(\): refreshAhead must be in \[0, 1\), got 1/],
      [{ refreshAhead: '0.5' }, TypeError, /new Cache\(\): refreshAhead must be a number, not string/],
      [{ recreate: 'yes' }, TypeError, /new Cache\(\): recreate must be true or false, not string/],
      [{ group: {} }, TypeError, /new Cache\(\): group must be a group name or a gid, not Object/],
      [{ group: -1 }, RangeError, /new Cache\(\): group must be a gid from 0 to 2\*\*32-1, got -1/],
      [{ group: 1.5 }, RangeError, /new Cache\(\): group must be a gid/],
      [{ group: 'no-such-group-zz' }, RangeError, /new Cache\(\): group "no-such-group-zz" does not exist on this host/],
      [{ lockTimeout: 0 }, RangeError, /new Cache\(\): lockTimeout must be a finite number of seconds > 0, got 0/],
      [{ lockTimeout: '1s' }, TypeError, /new Cache\(\): lockTimeout must be a number of seconds/],
    ]
    for (const [options, type, message] of bad) {
      assert.throws(() => new Cache(name, { directory: d, size: '8MiB', ...options }), (e) => {
        assert.ok(e instanceof type, `${JSON.stringify(options)}: ${e}`)
        assert.match(e.message, message)
        return true
      })
    }
    assert.deepEqual(readdirSync(d), [])
  })

  test('recreate replaces a damaged file with an empty one; without it the file is refused', () => {
    const d = directory()
    const name = cacheName('recreate')
    const first = new Cache(name, { directory: d, size: '8MiB' })
    first.set('k', 1)
    first.close()
    for (const f of readdirSync(d)) {
      if (!f.includes('.neg')) writeFileSync(join(d, f), Buffer.alloc(4096, 0xde), { flag: 'r+' })
    }
    assert.throws(
      () => new Cache(name, { directory: d, size: '8MiB', degraded: 'raise' }),
      // The reason is the engine's, in Python's words, as every degraded reason.
      (e) => e instanceof SegmentError && /recreate=True/.test(e.message),
    )
    const c = new Cache(name, { directory: d, size: '8MiB', recreate: true })
    try {
      assert.equal(c.degraded, false)
      assert.equal(c.get('k'), undefined)
      c.set('k', 2)
      assert.equal(c.get('k'), 2)
    } finally {
      c.unlink()
      c.close()
    }
  })

  test('group: the files are made mode 660 with that group, given as a gid or a name', () => {
    const gid = process.getgid()
    const groupName = execFileSync('id', ['-gn'], { encoding: 'utf8' }).trim()
    for (const group of [gid, groupName]) {
      const d = directory()
      const c = new Cache(cacheName('group'), { directory: d, size: '8MiB', group })
      try {
        const files = readdirSync(d)
        assert.equal(files.length, 2)
        for (const f of files) {
          const st = statSync(join(d, f))
          assert.equal(st.gid, gid, f)
          assert.equal(st.mode & 0o777, 0o660, f)
        }
      } finally {
        c.unlink()
        c.close()
      }
    }
  })
})
