// serializer: 'msgpack' against bytes another process wrote: msgpackr's
// extensions (shared references and cycles, records, bundled strings, Set,
// RegExp, Error, typed arrays, undefined) read as foreign misses, promptly,
// whatever the bytes would expand to; plain msgpack still reads.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import { Packr } from 'msgpackr'
import { opener } from './agents.mjs'

const require = createRequire(import.meta.url)
const native = require('../lib/native.cjs')
const cache = opener({ serializer: 'msgpack' })

/** Stores `bytes` under `key` of cache `name` as they are, as a Python process's serializer="msgpack" would. */
function plant(name, key, bytes) {
  const w = new native.NativeCache(name, {
    size: '8MiB',
    ttl: 60,
    jitter: 0,
    loaderTimeout: 5,
    l1: false,
    rawValues: true,
  })
  try {
    w.store(key, 5, undefined, bytes, undefined, undefined, undefined, undefined)
  } finally {
    w.close()
  }
}

const clone = new Packr({ structuredClone: true, moreTypes: true })

/** x = [1], then `levels` times x = [x, x]: a few bytes, 2^levels leaves as a tree. */
function dag(levels) {
  let x = [1]
  for (let i = 0; i < levels; i++) x = [x, x]
  return x
}

const cyclic = [1]
cyclic.push(cyclic)

const crafted = {
  dag: clone.pack(dag(22)),
  cycle: clone.pack(cyclic),
  set: clone.pack(new Set([1, 2])),
  regexp: clone.pack(/a+/g),
  error: clone.pack(new TypeError('x')),
  float64s: clone.pack(new Float64Array([1.5])),
  uint8s: clone.pack(new Uint8Array([1, 2])),
  bigint: clone.pack(2n ** 100n),
  undef: clone.pack([undefined]),
  records: new Packr({ useRecords: true }).pack([{ a: 1 }, { a: 2 }]),
  bundled: new Packr({ bundleStrings: true, useRecords: false }).pack({
    s: 'a string long enough to be bundled',
    t: 'and another one of the same kind',
  }),
  // Hand-made: one object reached twice through the reference extension
  // inside a plain map, and msgpack's never-used byte.
  twice: Buffer.from('82a161d66900000001' + '91a178' + 'a162d67000000001', 'hex'),
  never: Buffer.from('91c1', 'hex'),
}

test('the crafted bytes are what they claim', () => {
  assert.equal(crafted.dag.length, 288)
  const v = clone.unpack(crafted.dag)
  assert.equal(v[0], v[1], 'msgpackr itself reads a shared branch')
  const c = clone.unpack(crafted.cycle)
  assert.equal(c[1], c)
})

for (const l1Items of [0, 100]) {
  test(`msgpackr's extensions read as foreign misses, promptly (l1Items ${l1Items})`, async () => {
    const c = cache(`mp-foreign-${l1Items}`, { l1Items })
    for (const [k, b] of Object.entries(crafted)) plant(c.name, k, b)
    const before = c.stats()
    for (const k of Object.keys(crafted)) {
      const t0 = performance.now()
      const v = c.get(k)
      const ms = performance.now() - t0
      assert.equal(v, undefined, `${k}: ${Object.prototype.toString.call(v)}`)
      assert.ok(ms < 100, `${k} read in ${ms.toFixed(1)} ms`)
      assert.equal(c.has(k), false, k)
    }
    const after = c.stats()
    assert.equal(after.foreign - before.foreign, 2 * Object.keys(crafted).length)
    assert.equal(after.decodeErrors, before.decodeErrors)
    // getOrSet answers with its loader's value instead.
    assert.deepEqual(await c.getOrSet('dag', () => ({ mine: [1, 2] })), { mine: [1, 2] })
    assert.equal(await c.getOrSet('cycle', () => 'loaded'), 'loaded')
  })
}

test('plain msgpack from another writer still reads, Dates, Buffers and BigInts included', () => {
  const c = cache('mp-plain', { l1Items: 100 })
  const plainPackr = new Packr({ useRecords: false, int64AsType: 'auto' })
  const shared = { s: 'same' }
  const values = {
    tree: { a: [1, 2.5, 'x', null, true, false], nested: { deep: [{}], n: NaN } },
    // Two equal branches written without references: a tree, not a shared object.
    copies: [shared, shared],
    bytes: Buffer.from([0, 255]),
    date: new Date(1700000000123),
    big: { u64: 2n ** 64n - 1n, i64: -(2n ** 62n) },
    str: 'naïve ✓ 🎉',
  }
  for (const [k, v] of Object.entries(values)) plant(c.name, k, plainPackr.pack(v))
  // Python's msgpack: map16, str8, a 96-bit timestamp (ext 8, length 12).
  plant(c.name, 'py', Buffer.from('de0001d90161c70cff00000000000000006553f100', 'hex'))
  for (const [k, v] of Object.entries(values)) assert.deepEqual(c.get(k), v, k)
  const copies = c.get('copies')
  assert.notEqual(copies[0], copies[1])
  assert.deepEqual(c.get('py'), { a: new Date(1700000000000) })
  assert.equal(c.stats().foreign, 0)
  assert.equal(c.stats().decodeErrors, 0)
})

test('bytes that are not msgpack count as decode errors', () => {
  const c = cache('mp-malformed', { l1Items: 0 })
  const bad = {
    truncated: Buffer.from('92a3616263', 'hex'),
    trailing: Buffer.from('9101ff', 'hex'),
    json: Buffer.from('{"a":1}'),
    huge: Buffer.from('ddffffffff01', 'hex'),
  }
  for (const [k, b] of Object.entries(bad)) plant(c.name, k, b)
  for (const k of Object.keys(bad)) assert.equal(c.get(k), undefined, k)
  assert.equal(c.stats().decodeErrors, Object.keys(bad).length)
  assert.equal(c.stats().foreign, 0)
})
