'use strict'
// This process's L1: live objects, each validated on every hit against words
// of the mapped segment with Atomics.load (the key's stamp, the segment
// epoch, its tags' versions) and its deadline, with no call into the addon.
// Any process's write moves one of those words before it returns, so an
// entry is never served after a write that returned. Bounded by item count;
// the oldest entry is evicted first.
//
// The deadline is the entry's soft deadline in ms of the engine's clock,
// compared with the clock word the addon keeps current (two 32-bit halves).
// Of the 64-bit epoch, the low half is compared: a clear moves it, and only
// 2^32 clears during one entry's life could bring it back (the key's 32-bit
// stamp has the same bound, 2^31 writes of keys sharing it).

const native = require('./native.cjs')

/** The clock word, shared by every cache of the process; null without external buffers. */
const clockBuffer = native.NativeCache.clock()
const clock = clockBuffer ? new Uint32Array(clockBuffer) : null

/**
 * This thread's meta words: what the addon's last call found beside its
 * result (0 what, 1 whether L1 may keep it, 2 stamp index, 3 stamp, 4 epoch
 * low, 5 epoch high, 6 deadline low, 7 deadline high, 8 tags, then cell and
 * version of each tag).
 */
const metaBuffer = native.NativeCache.meta()
if (!metaBuffer) {
  throw new Error('ziggurat: this JavaScript runtime refuses external array buffers, which the cache needs')
}
const meta = new Uint32Array(metaBuffer)

/** A copy of a cached object one level deep (arrays, plain objects, bytes). */
function shallow(v) {
  if (v === null || typeof v !== 'object') return v
  if (Array.isArray(v)) return v.slice()
  if (v instanceof Uint8Array) return Buffer.from(v)
  return { ...v }
}

/** `v` and everything in it frozen (byte arrays cannot be frozen and are left as they are). */
function deepFreeze(v) {
  if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v) || Object.isFrozen(v)) return v
  Object.freeze(v)
  for (const k of Object.keys(v)) deepFreeze(v[k])
  return v
}

class L1 {
  /**
   * @param {number} max items kept (0: no L1)
   * @param {ArrayBuffer[]} words the stamp table, the tag table and the epoch
   * @param {'shared' | 'copy'} copy what a hit returns: the cached object, or a shallow copy
   * @param {boolean} debug deep-freeze the cached objects, so that a mutation throws
   */
  constructor(max, words, copy, debug) {
    this.copy = copy === 'copy'
    this.debug = debug
    this.max = clock === null ? 0 : max
    this.strings = new Map()
    this.buffers = new Map()
    this.stamps = new Uint32Array(words[0])
    this.tags = new Uint32Array(words[1])
    this.epoch = new Uint32Array(words[2])
    this.hits = 0
  }

  get size() {
    return this.strings.size + this.buffers.size
  }

  /** The map and map key of `key` (a string or a Buffer). */
  where(key) {
    return typeof key === 'string' ? [this.strings, key] : [this.buffers, key.toString('latin1')]
  }

  /** The live value of `key`, or `miss` when L1 holds nothing valid for it. */
  get(map, k, miss) {
    const e = map.get(k)
    if (e === undefined) return miss
    if (Atomics.load(this.stamps, e.stamp) !== e.seen || Atomics.load(this.epoch, 0) !== e.epoch) {
      map.delete(k)
      return miss
    }
    if (e.timed) {
      const hi = Atomics.load(clock, 1)
      if (hi > e.softHi || (hi === e.softHi && Atomics.load(clock, 0) >= e.softLo)) {
        map.delete(k)
        return miss
      }
    }
    const t = e.tags
    if (t !== null) {
      for (let i = 0; i < t.length; i += 2) {
        if (Atomics.load(this.tags, t[i]) !== t[i + 1]) {
          map.delete(k)
          return miss
        }
      }
    }
    this.hits++
    return this.copy ? shallow(e.value) : e.value
  }

  /** What a caller gets of a value this L1 may share with other callers. */
  out(v) {
    return this.copy ? shallow(v) : v
  }

  /**
   * Keeps `value` for `key` if the addon's last call said it may (meta word
   * 1), watching the words it named; else drops any entry of `key`.
   */
  keep(key, value) {
    const [map, k] = this.where(key)
    if (this.max === 0 || meta[1] === 0) {
      map.delete(k)
      return
    }
    if (!map.has(k) && this.size >= this.max) this.evict()
    const ntags = meta[8]
    map.set(k, {
      value: this.debug ? deepFreeze(value) : this.copy ? shallow(value) : value,
      stamp: meta[2],
      seen: meta[3],
      epoch: meta[4],
      tags: ntags === 0 ? null : Array.from(meta.subarray(9, 9 + 2 * ntags)),
      timed: (meta[6] | meta[7]) !== 0,
      softLo: meta[6],
      softHi: meta[7],
    })
  }

  drop(key) {
    const [map, k] = this.where(key)
    map.delete(k)
  }

  evict() {
    const map = this.strings.size >= this.buffers.size ? this.strings : this.buffers
    const first = map.keys().next()
    if (!first.done) map.delete(first.value)
  }

  clear() {
    this.strings.clear()
    this.buffers.clear()
  }
}

module.exports = { L1, meta, shallow, deepFreeze }
