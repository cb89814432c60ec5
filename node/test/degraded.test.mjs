// The degraded modes, as in Python: a segment that cannot be opened (a missing or
// unwritable directory, no room, a damaged file) is refused ('raise'), or the cache runs
// without it ('passthrough': nothing cached; 'local': this process alone, for at most
// degradedTtl), with the causes and messages Python gives for the same directory.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, openSync, readdirSync, rmSync, statfsSync, writeSync, closeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { Cache, SegmentError, ZigguratError } from 'ziggurat'
import { cacheName, python } from './agents.mjs'

const base = mkdtempSync(join(tmpdir(), 'ziggurat-degraded-'))
const shm = []
after(() => {
  rmSync(base, { recursive: true, force: true })
  for (const d of shm) rmSync(d, { recursive: true, force: true })
})

/** The warnings given so far, once those of this tick were emitted. */
async function given() {
  await new Promise((r) => setImmediate(r))
  return warnings
}

const warnings = []
process.on('warning', (w) => {
  if (w.name === 'ZigguratWarning') warnings.push(w.message)
})

let made = 0
/** A fresh directory of the test. */
function dir() {
  return mkdtempSync(join(base, `d${made++}-`))
}

// Each cause: (directory, name, size) of a cache that cannot open its segment there.
const CAUSES = {
  missing_directory: () => [join(dir(), 'no', 'such', 'dir'), cacheName('missing'), '8MiB'],
  // Tests run as root, which ignores permission bits; sysfs refuses new files to root too.
  not_writable: () => ['/sys', cacheName('sys'), '8MiB'],
  no_space: () => {
    // Twice what the file system holds (a tmpfs, whose size is within the largest size)
    const d = mkdtempSync('/dev/shm/ziggurat-degraded-')
    shm.push(d)
    const st = statfsSync(d)
    return [d, cacheName('room'), 2 * st.blocks * st.bsize]
  },
  damaged: () => {
    const d = dir()
    const name = cacheName('damaged')
    new Cache(name, { size: '8MiB', directory: d }).close()
    for (const f of readdirSync(d).filter((f) => !f.includes('.neg'))) {
      const fd = openSync(join(d, f), 'r+')
      writeSync(fd, Buffer.alloc(4096, 0xde), 0, 4096, 0)
      closeSync(fd)
    }
    return [d, name, '8MiB']
  },
}

/** What Python says of the same directory and name: [cause, reason]. */
function pythonSays(directory, name, size) {
  const code = `
import json, sys, warnings
from ziggurat import Cache
warnings.simplefilter("ignore")
size = sys.argv[3]
c = Cache(sys.argv[1], int(size) if size.isdigit() else size, directory=sys.argv[2], degraded="passthrough")
print(json.dumps([c.stats()["degraded_cause"], c.degraded_reason]))
c.close()
`
  return JSON.parse(execFileSync(python(), ['-c', code, name, directory, String(size)], { encoding: 'utf8' }))
}

describe("degraded: 'raise'", () => {
  for (const [cause, make] of Object.entries(CAUSES)) {
    test(`${cause}: SegmentError naming the cache, with Python's cause and reason in this API's words`, () => {
      const [directory, name, size] = make()
      let err
      assert.throws(
        () => new Cache(name, { size, directory, degraded: 'raise' }),
        (e) => {
          err = e
          return e instanceof SegmentError && e instanceof ZigguratError
        },
      )
      const [pyCause, pyReason] = pythonSays(directory, name, size)
      const expected = cause === 'damaged' ? ['damaged', 'incompatible'] : [cause]
      assert.ok(expected.includes(err.code), `${err.code} for ${cause}`)
      assert.equal(err.code, pyCause)
      // (the free space of the directory, which other processes change, aside)
      const free = (m) => m.replace(/\d+ bytes are available/, 'N bytes are available')
      // The one option a reason names here, as each language writes it.
      const nodeReason = pyReason.replaceAll('recreate=True', 'recreate: true')
      assert.equal(
        free(err.message),
        free(`new Cache(${JSON.stringify(name)}): the shared segment cannot be used: ${nodeReason}`),
      )
    })
  }
})

describe("degraded: 'passthrough' (the default)", () => {
  test('nothing is cached: every getOrSet loads, writes are not kept', async () => {
    const name = cacheName('pass')
    const directory = join(dir(), 'missing')
    const before = warnings.length
    const c = new Cache(name, { size: '8MiB', directory })
    try {
      assert.equal(c.degraded, true)
      assert.equal(c.degradedCause, 'missing_directory')
      assert.match(c.degradedReason, /does not exist/)
      assert.equal(
        (await given())[before],
        `ziggurat cache ${JSON.stringify(name)} runs without its shared segment (${c.degradedReason}); ` +
          "degraded: 'passthrough': nothing is cached until the cause is fixed and the process restarts",
      )
      c.set('k', { a: 1 })
      assert.equal(c.get('k'), undefined)
      assert.equal(c.has('k'), false)
      let loads = 0
      const loader = async () => ({ n: ++loads })
      assert.deepEqual(await c.getOrSet('p', loader), { n: 1 })
      assert.deepEqual(await c.getOrSet('p', loader), { n: 2 })
      // Concurrent callers of one key in this process still share one load.
      const [a, b] = await Promise.all([c.getOrSet('q', loader), c.getOrSet('q', loader)])
      assert.equal(a, b)
      assert.equal(loads, 3)
      assert.equal(c.add('k', 1), true)
      assert.equal(c.add('k', 1), true)
      assert.equal(c.incr('n', 2, { default: 10 }), 12)
      assert.equal(c.incr('n', 2, { default: 10 }), 12)
      assert.equal(c.touch('k'), false)
      assert.equal(c.delete('k'), false)
      const s = c.stats()
      assert.equal(s.degradedCause, 'missing_directory')
      assert.equal(s.degradedMode, 'passthrough')
      assert.equal(s.loads, 3)
      assert.deepEqual(s.host, {})
      // Bad input is still refused.
      assert.throws(() => c.set('', 1), RangeError)
      assert.throws(() => c.set('d', new Map()), TypeError)
    } finally {
      c.close()
    }
    assert.throws(() => c.get('k'), /is closed/)
  })
})

describe("degraded: 'local'", () => {
  test('each process caches alone, entries live at most degradedTtl', async () => {
    const name = cacheName('local')
    const directory = '/sys'
    const before = warnings.length
    const c = new Cache(name, { size: '8MiB', directory, degraded: 'local', degradedTtl: '1h' })
    try {
      assert.equal(c.degradedCause, 'not_writable')
      assert.match((await given())[before], /degraded: 'local': each process caches alone, entries live at most degradedTtl: 3600 s$/)
      c.set('k', { a: 1 }, { ttl: 3600, tags: ['t'] })
      assert.deepEqual(c.get('k'), { a: 1 })
      // Another process on the same cache sees none of it.
      const other = execFileSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import { Cache } from 'ziggurat'
process.on('warning', () => {})
const c = new Cache(${JSON.stringify(name)}, { size: '8MiB', directory: '/sys', degraded: 'local' })
console.log(JSON.stringify([c.degraded, c.get('k') ?? null]))`,
        ],
        { encoding: 'utf8' },
      )
      assert.deepEqual(JSON.parse(other), [true, null])
      assert.equal(c.add('k', 2), false)
      assert.equal(c.add('j', 2), true)
      assert.equal(c.incr('n'), 1)
      assert.equal(c.incr('n', 4), 5)
      assert.throws(() => c.incr('k'), TypeError)
      c.invalidateTags('t')
      assert.equal(c.get('k'), undefined)
      let loads = 0
      assert.equal(await c.getOrSet('g', async () => ++loads), 1)
      assert.equal(await c.getOrSet('g', async () => ++loads), 1)
      assert.equal(await c.getOrSet('none', async () => null), undefined)
      assert.equal(await c.getOrSet('none', async () => 'now'), 'now') // a loader's null is not cached
      const ns = c.namespace('users')
      ns.set('1', 'ada')
      assert.equal(c.get('users:1'), 'ada')
      ns.clear()
      assert.equal(ns.get('1'), undefined)
      // At most degradedTtl, whatever the ttl asked for.
      const brief = new Cache(name, { size: '8MiB', directory, degraded: 'local', degradedTtl: '250ms' })
      brief.set('short', 'v', { ttl: 3600 })
      assert.equal(await brief.getOrSet('g', async () => 'loaded'), 'loaded')
      assert.equal(brief.get('short'), 'v')
      await new Promise((r) => setTimeout(r, 700))
      assert.equal(brief.get('short'), undefined)
      assert.equal(brief.get('g'), undefined)
      brief.close()
      c.set('x', 1)
      c.clear()
      assert.equal(c.get('x'), undefined)
      assert.equal(c.stats().l1.maxItems, 10_000)
    } finally {
      c.close()
    }
  })

  test('its store counts evictions, and its loads their seconds', async () => {
    const c = new Cache(cacheName('local-stats'), { size: '8MiB', directory: '/sys', degraded: 'local', l1Items: 2 })
    try {
      for (const k of ['a', 'b', 'c']) c.set(k, k)
      assert.equal(await c.getOrSet('slow', () => new Promise((resolve) => setTimeout(() => resolve(1), 40))), 1)
      const s = c.stats()
      assert.equal(s.l1.evictions, 2)
      assert.equal(s.loads, 1)
      assert.ok(s.loadMaxSeconds >= 0.035 && s.loadSeconds === s.loadMaxSeconds, JSON.stringify(s))
    } finally {
      c.close()
    }
  })
})

test('the degraded options are checked', () => {
  assert.throws(() => new Cache(cacheName('bad'), { degraded: 'maybe' }), {
    name: 'RangeError',
    message: /^new Cache\(\): degraded must be 'passthrough', 'local' or 'raise', got "maybe"$/,
  })
  assert.throws(() => new Cache(cacheName('bad'), { degradedTtl: 0 }), RangeError)
})
