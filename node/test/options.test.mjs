// The options of new Cache() that choose and make the segment files:
// recreate, group, version and lockTimeout, as Python's.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { Cache, SegmentError } from 'ziggurat'
import { cacheName, python } from './agents.mjs'

describe('segment options', () => {
  /** A private directory, removed after the test. */
  function directory() {
    const d = mkdtempSync('/dev/shm/zignoderefresh-')
    after(() => rmSync(d, { recursive: true, force: true }))
    return d
  }

  test('bad refreshAhead, recreate, group, version and lockTimeout are refused, naming the option, and create no file', () => {
    const d = directory()
    const name = cacheName('opts')
    const bad = [
      [{ refreshAhead: 1 }, RangeError, /new Cache\(\): refreshAhead must be in \[0, 1\), got 1/],
      [{ refreshAhead: '0.5' }, TypeError, /new Cache\(\): refreshAhead must be a number, not string/],
      [{ recreate: 'yes' }, TypeError, /new Cache\(\): recreate must be true or false, not string/],
      [{ group: {} }, TypeError, /new Cache\(\): group must be a group name or a gid, not Object/],
      [{ group: -1 }, RangeError, /new Cache\(\): group must be a gid from 0 to 4294967295, got -1/],
      [{ group: 1.5 }, RangeError, /new Cache\(\): group must be a gid/],
      [{ group: 'no-such-group-zz' }, RangeError, /new Cache\(\): group "no-such-group-zz" does not exist on this host/],
      [{ lockTimeout: 0 }, RangeError, /new Cache\(\): lockTimeout must be a finite number of seconds > 0, got 0/],
      [{ lockTimeout: '1s' }, TypeError, /new Cache\(\): lockTimeout must be a number of seconds/],
      [{ version: -1 }, RangeError, /new Cache\(\): version must be a whole number >= 0 or a string, got -1/],
      [{ version: 1.5 }, RangeError, /new Cache\(\): version must be a whole number >= 0/],
      [{ version: 'v.2' }, RangeError, /new Cache\(\): version must be 1-16 characters of A-Z a-z 0-9 _ -, got "v\.2"/],
      [{ version: '' }, RangeError, /new Cache\(\): version must be/],
      [{ version: 'x'.repeat(17) }, RangeError, /new Cache\(\): version must be/],
      [{ version: [1] }, TypeError, /new Cache\(\): version must be a whole number or a string, not an array/],
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

  test('a size or negSize out of its range is a RangeError naming the option and the range, not a degraded cache', () => {
    const d = directory()
    const name = cacheName('size-range')
    const bad = [
      [{ size: 100 }, /^new Cache\(\): size must be between 1048576 and 137438953472 bytes, got 100$/],
      [{ size: '200GiB' }, /^new Cache\(\): size must be between .* got 214748364800$/],
      [{ size: 8 << 20, negSize: 100 }, /^new Cache\(\): negSize must be between 1048576 and .* got 100$/],
    ]
    for (const [options, message] of bad) {
      for (const degraded of ['passthrough', 'local']) {
        assert.throws(() => new Cache(name, { directory: d, degraded, ...options }), (e) => {
          assert.ok(e instanceof RangeError, `${JSON.stringify(options)}: ${e}`)
          assert.match(e.message, message)
          return true
        })
      }
    }
    assert.deepEqual(readdirSync(d), [])
  })

  test('a new size on an existing segment: the file is used as it is, and said once, with the remedy', () => {
    const d = directory()
    const name = cacheName('resized')
    const first = new Cache(name, { directory: d, size: '8MiB' })
    const fileSize = first.stats().host.file_size
    const warnings = []
    const onWarning = (w) => warnings.push(w)
    const same = new Cache(name, { directory: d, size: '8MiB', onWarning })
    assert.deepEqual(warnings, [])
    const bigger = new Cache(name, { directory: d, size: '16MiB', onWarning })
    assert.equal(bigger.stats().host.file_size, fileSize)
    assert.equal(warnings.length, 1)
    assert.equal(warnings[0].name, 'ZigguratWarning')
    assert.match(warnings[0].message, /^ziggurat cache ".*": the segment at .* was created with other parameters \(a \d+-byte file, where size=16777216 and avgItemSize=256 make a \d+-byte one\)/)
    assert.match(warnings[0].message, /new `version`/)
    assert.match(warnings[0].message, /cache\.unlink\(\)/)
    // Once per process, however often the cache opens.
    new Cache(name, { directory: d, size: '16MiB', onWarning }).close()
    assert.equal(warnings.length, 1)
    for (const c of [same, bigger]) c.close()
    first.unlink()
    first.close()
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
      // The reason is the engine's, in this API's words.
      (e) => e instanceof SegmentError && /recreate: true/.test(e.message) && !/recreate=True/.test(e.message),
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

  test("version: a segment of its own for each version, the same as Python's", () => {
    const d = directory()
    const name = cacheName('version')
    const py = (code) =>
      execFileSync(python(), ['-c', `import sys\nfrom ziggurat import Cache\nc = Cache(sys.argv[1], "8MiB", directory=sys.argv[2], version=3)\n${code}`, name, d], {
        encoding: 'utf8',
      }).trim()
    py('c.set("k", "from python v3")')
    const v3 = new Cache(name, { directory: d, size: '8MiB', version: 3 })
    const plain = new Cache(name, { directory: d, size: '8MiB' })
    const named = new Cache(name, { directory: d, size: '8MiB', version: 'blue-2' })
    try {
      assert.equal(v3.name, name)
      assert.equal(v3.get('k'), 'from python v3')
      assert.equal(plain.get('k'), undefined)
      assert.equal(named.get('k'), undefined)
      v3.set('n', 'from node v3')
      assert.equal(py('print(c.get("n"))'), 'from node v3')
      const files = readdirSync(d).sort()
      assert.ok(files.some((f) => f.includes(`${name}.ver-3`) && !f.includes('.neg')), files.join(' '))
      assert.ok(files.some((f) => f.includes(`${name}.ver-blue-2`)), files.join(' '))
    } finally {
      for (const c of [v3, plain, named]) {
        c.unlink()
        c.close()
      }
    }
  })
})
