// getOrSet's early refresh (refreshAhead): a hit late in its value's life
// answers at once with that value and reloads it in the background, once per
// host, whatever the language of the callers.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, test } from 'node:test'
import { Cache } from 'ziggurat'
import { opener, python } from './agents.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const run = promisify(execFile)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const cache = opener()

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

// ttl 6 s, refresh in its last 80%: from 1.2 s after a load a hit is in the
// window, and the value stays fresh for seconds more, for slow machines.
const OPTIONS = { ttl: 6, refreshAhead: 0.8, jitter: 0 }
const IN_WINDOW = 1300

describe('refreshAhead', () => {
  test('a hit in the window returns the old value at once and reloads it in the background', async () => {
    const c = cache('refresh', OPTIONS)
    assert.equal(await c.getOrSet('k', () => 'v1'), 'v1')
    const early = gated('unused')
    assert.equal(await c.getOrSet('k', early), 'v1')
    assert.equal(early.calls, 0, 'a hit before the window does not reload')
    await sleep(IN_WINDOW)
    const load = gated('v2')
    // The loader has not returned, yet the call resolves with the value it replaces.
    assert.equal(await c.getOrSet('k', load, { tags: ['refreshed'] }), 'v1')
    assert.equal(load.calls, 1)
    assert.equal(c.stats().refreshes, 1)
    // Hits while the refresh runs start no other.
    const again = gated('v3')
    assert.equal(await c.getOrSet('k', again), 'v1')
    assert.equal(again.calls, 0)
    load.release()
    assert.equal(await changed(() => c.get('k'), 'v1'), 'v2')
    assert.equal(again.calls, 0)
    // The refreshed value was stored with the call's options.
    c.invalidateTags('refreshed')
    assert.equal(c.get('k'), undefined)
  })

  test('a value read from the segment (no L1) in the window is refreshed too', async () => {
    const c = cache('refresh-l2', { ...OPTIONS, l1Items: 0 })
    c.set('k', 'old')
    await sleep(IN_WINDOW)
    const load = gated('new')
    assert.equal(await c.getOrSet('k', load), 'old')
    assert.equal(load.calls, 1)
    load.release()
    assert.equal(await changed(() => c.get('k'), 'old'), 'new')
  })

  test('without refreshAhead a hit in the last part of a life does not reload', async () => {
    const c = cache('refresh-off', { ttl: 6, jitter: 0 })
    c.set('k', 'v1')
    await sleep(IN_WINDOW)
    const load = gated('v2')
    assert.equal(await c.getOrSet('k', load), 'v1')
    assert.equal(load.calls, 0)
  })

  test('once per host: other processes, in Node.js and Python, hitting in the window do not reload', async () => {
    const c = cache('refresh-host', OPTIONS)
    const name = c.name
    assert.equal(await c.getOrSet('k', () => 'v1'), 'v1')
    await sleep(IN_WINDOW)
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
         const c = new Cache(${JSON.stringify(name)}, { size: '8MiB', ttl: 6, refreshAhead: 0.8, jitter: 0 })
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
c = Cache(sys.argv[1], "8MiB", ttl=6, refresh_ahead=0.8, jitter=0)
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
    const c = cache('refresh-fail', OPTIONS)
    assert.equal(await c.getOrSet('k', () => 'v1'), 'v1')
    await sleep(IN_WINDOW)
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
