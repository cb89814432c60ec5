'use strict'
// This process's L1: live objects, each validated on every hit against words
// of the mapped segment with Atomics.load (the key's stamp, the segment
// epoch, its tags' versions) and its deadline, with no call into the addon.
// Any process's write moves one of those words before it returns, so an
// entry is never served after a write that returned. Bounded by item count;
// the oldest entry is evicted first.
//
// The deadline is the entry's soft deadline in ms of the engine's clock,
// compared with the clock the addon keeps current: as one 32-bit word of ms
// since the clock's base while that word can say it (the first 49.7 days of
// the process), else as two 32-bit halves.
// Of the 64-bit epoch, the low half is compared: a clear moves it, and only
// 2^32 clears during one entry's life could bring it back (the key's 32-bit
// stamp has the same bound, 2^31 writes of keys sharing it).

const native = require('./native.cjs')

/**
 * The clock block, shared by every cache of the process (0 and 1 the time,
 * low and high; 2 the ms since the base, saturated at 2^32 - 1; 3 and 4 the
 * base); null without external buffers.
 */
const clockBuffer = native.NativeCache.clock()
const clock = clockBuffer ? new Uint32Array(clockBuffer) : null
const clockBase = clock ? clock[3] + clock[4] * 2 ** 32 : 0
// The short clock's largest value: where it stops, the short form says nothing.
const SHORT_MAX = 2 ** 32 - 1

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
    /** Entries in the order they were kept (see evict()), from index `head`. */
    this.queue = []
    this.head = 0
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
    let hi
    const e = map.get(k)
    if (e === undefined) return miss
    if (Atomics.load(this.stamps, e.stamp) !== e.seen || Atomics.load(this.epoch, 0) !== e.epoch) {
      map.delete(k)
      return miss
    }
    if (e.timed) {
      // A plain load of the short clock for a deadline within its range: the
      // clock is this process's own word, not the segment's, and the load
      // follows the Atomics.load calls above, which V8 cannot see through, so
      // it is made anew on every hit. (Each Atomics.load is a call in V8, the
      // larger part of a hit's cost.) Two atomic loads for any other deadline.
      if (
        e.short < SHORT_MAX
          ? clock[2] >= e.short
          : (hi = Atomics.load(clock, 1)) > e.softHi || (hi === e.softHi && Atomics.load(clock, 0) >= e.softLo)
      ) {
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
    if (this.max === 0) return
    // No [map, key] pair here: keep() runs on every read below L1.
    const str = typeof key === 'string'
    const map = str ? this.strings : this.buffers
    const k = str ? key : key.toString('latin1')
    if (meta[1] === 0) {
      map.delete(k)
      return
    }
    if (!map.has(k) && this.size >= this.max) this.evict()
    const ntags = meta[8]
    const e = {
      map,
      key: k,
      value: this.debug ? deepFreeze(value) : this.copy ? shallow(value) : value,
      stamp: meta[2],
      seen: meta[3],
      epoch: meta[4],
      tags: ntags === 0 ? null : Array.from(meta.subarray(9, 9 + 2 * ntags)),
      timed: (meta[6] | meta[7]) !== 0,
      softLo: meta[6],
      softHi: meta[7],
      // The deadline on the short clock: 0 for one before its base (so
      // expired), SHORT_MAX for one beyond its range (the long form decides).
      short: Math.min(Math.max(meta[6] + meta[7] * 2 ** 32 - clockBase, 0), SHORT_MAX),
    }
    map.set(k, e)
    this.queue.push(e)
    if (this.queue.length - this.head > 2 * this.max + 64) this.compact()
  }

  drop(key) {
    const [map, k] = this.where(key)
    map.delete(k)
  }

  /**
   * Drops the entry kept longest ago. The queue holds the entries in the
   * order they were kept, replaced and dropped ones too (skipped here): not
   * the maps' own order, whose first live key a Map finds only past the
   * slots of every key deleted before it, a cost that grew with the L1.
   */
  evict() {
    const q = this.queue
    while (this.head < q.length) {
      const e = q[this.head]
      q[this.head++] = undefined
      if (e.map.get(e.key) === e) {
        e.map.delete(e.key)
        break
      }
    }
    if (this.head > 1024 && 2 * this.head > q.length) {
      this.queue = q.slice(this.head)
      this.head = 0
    }
  }

  /** The queue without its replaced and dropped entries (at most `max` remain). */
  compact() {
    const live = []
    for (let i = this.head; i < this.queue.length; i++) {
      const e = this.queue[i]
      if (e.map.get(e.key) === e) live.push(e)
    }
    this.queue = live
    this.head = 0
  }

  clear() {
    this.strings.clear()
    this.buffers.clear()
    this.queue = []
    this.head = 0
  }
}

module.exports = { L1, meta, shallow, deepFreeze }
