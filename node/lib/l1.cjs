'use strict'
// This process's L1: live objects, each validated on every hit against words
// of the mapped segment with Atomics.load (the key's stamp, the segment
// epoch, its tags' versions) and its deadline, with no call into the addon.
// Any process's write moves one of those words before it returns, so an
// entry is never served after a write that returned. Bounded by item count,
// with a separate bound for loaders' cached misses (kept for getOrSet, as
// the Python front end keeps them); eviction is CLOCK, as in the Python
// front end's L1 (ziggurat-cache's table): entries queue in the order they
// were kept, and one hit since it was queued sends an entry to the back of
// the queue once instead of out, so a hot key outlives a scan of cold ones.
// With copy: 'decode', an entry holds its value's encoding instead (unless
// the value cannot change), and each hit decodes it anew.
//
// The deadline is the entry's soft deadline in ms of the engine's clock,
// compared with the clock the addon keeps current: as one 32-bit word of ms
// since the clock's base while that word can say it (the first 49.7 days of
// the process), else as two 32-bit halves.
// Of the 64-bit epoch, the low half is compared: a clear moves it, and only
// 2^32 clears during one entry's life could bring it back (the key's 32-bit
// stamp has the same bound, 2^31 writes of keys sharing it).
//
// A cached miss watches the same words as a value: the key's stamp in the
// main segment (a cached miss counts only while the stamp it was stored
// under holds, so any write of the key ends it), the epoch, and its tags'
// versions, which live in the cached-miss segment's own tag table.

const native = require('./native.cjs')
const { CODES } = require('./rules.cjs')
const { encode, encoded, keptForm, fresh, again } = require('./values.cjs')

/**
 * The clock block, shared by every cache of the process (0 and 1 the time,
 * low and high; 2 the ms since the base, saturated at 2^32 - 1; 3 and 4 the
 * base); null without external buffers.
 */
const clockBuffer = native.buffers.clock()
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
const metaBuffer = native.buffers.meta()
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

/**
 * Sets what entry `e` keeps of `value` by the copy mode of `how` (an L1 or
 * the degraded store: its `decode`, `copy`, `debug` and `serializer`), and
 * `e.code`: with copy: 'decode', an object as its encoding (`code` and
 * `form` when the caller has them, else made here from a value its method
 * checked, so encode() does not throw) and that code; else the value itself
 * (deep-frozen in debug mode, a shallow copy in copy mode) and 0.
 *
 * @example
 * hold(l1, entry, { a: 1 }, JSON_TEXT, '{"a":1}')
 */
function hold(how, e, value, code, form) {
  if (how.decode && encoded(value)) {
    if (code === undefined) {
      const enc = encode(value, 'Cache.getOrSet()', how.serializer)
      code = enc[0]
      form = enc[1] ?? enc[2]
    }
    e.value = keptForm(code, form)
    e.code = code
    return
  }
  e.value = how.debug ? deepFreeze(value) : how.copy ? shallow(value) : value
  e.code = NOTHING
}

/**
 * What a hit of entry `e` (kept by hold()) hands out by the copy mode of
 * `how`: a new decode of an encoding, a shallow copy, or the value itself.
 *
 * @example
 * handOut(l1, entry) // { a: 1 }
 */
function handOut(how, e) {
  return e.code !== NOTHING ? fresh(e.code, e.value) : how.copy ? shallow(e.value) : e.value
}

/** What the addon's meta word 0 says: nothing, or a cached miss. */
const { NOTHING, NEGATIVE } = CODES

/** The marker of a cached miss in `L1.negative()`'s answer. */
const CACHED_MISS = Symbol('cached miss')

/**
 * The CLOCK queue of one bound (values, or cached misses): entries in the
 * order they were kept, from index `head`, replaced and dropped ones too
 * (skipped here). Not the maps' own order, whose first live key a Map finds
 * only past the slots of every key deleted before it, a cost that grew with
 * the L1.
 */
class Ring {
  constructor(max) {
    this.max = max
    this.items = []
    this.head = 0
  }

  push(e) {
    this.items.push(e)
    if (this.items.length - this.head > 2 * this.max + 64) this.compact()
  }

  /**
   * Drops one entry: the first in the queue not hit since it was queued;
   * each one hit on the way loses its mark and goes to the back (its second
   * chance). False when the queue holds no live entry.
   */
  evict() {
    const q = this.items
    let done = false
    while (this.head < q.length) {
      const e = q[this.head]
      q[this.head++] = undefined
      if (e.map.get(e.key) !== e) continue
      if (e.hit !== 0) {
        e.hit = 0
        q.push(e)
        continue
      }
      e.map.delete(e.key)
      done = true
      break
    }
    if (this.head > 1024 && 2 * this.head > q.length) {
      this.items = q.slice(this.head)
      this.head = 0
    }
    return done
  }

  /** The queue without its replaced and dropped entries (at most `max` remain). */
  compact() {
    const live = []
    for (let i = this.head; i < this.items.length; i++) {
      const e = this.items[i]
      if (e.map.get(e.key) === e) live.push(e)
    }
    this.items = live
    this.head = 0
  }

  clear() {
    this.items = []
    this.head = 0
  }
}

class L1 {
  /**
   * @param {number} max items kept (0: no L1)
   * @param {ArrayBuffer[]} words the stamp table, the tag table, the epoch and the
   *   cached-miss segment's tag table (the tags of a cached miss are its words)
   * @param {'shared' | 'copy' | 'decode'} copy what a hit returns: the cached object, a
   *   shallow copy, or a value decoded anew from the encoding kept
   * @param {boolean} debug deep-freeze the cached objects, so that a mutation throws
   * @param {number} [maxNegative] loaders' cached misses kept (default max / 10; 0: none)
   * @param {'auto' | 'msgpack'} [serializer] the cache's codec ('decode' encodes with it)
   */
  constructor(max, words, copy, debug, maxNegative, serializer = 'auto') {
    this.copy = copy === 'copy'
    this.decode = copy === 'decode'
    this.serializer = serializer
    this.debug = debug
    this.max = clock === null ? 0 : max
    this.maxNegative = this.max === 0 ? 0 : (maxNegative ?? Math.floor(max / 10))
    this.strings = new Map()
    this.buffers = new Map()
    /** Cached misses, apart from the values: only getOrSet looks for them. */
    this.negStrings = new Map()
    this.negBuffers = new Map()
    this.stamps = new Uint32Array(words[0])
    this.tags = new Uint32Array(words[1])
    this.epoch = new Uint32Array(words[2])
    this.negTags = new Uint32Array(words[3])
    this.hits = 0
    /** Entries found expired or invalidated, and dropped. */
    this.staleDrops = 0
    /** Entries dropped to stay within max (or maxNegative). */
    this.evictions = 0
    this.queue = new Ring(this.max)
    this.negQueue = new Ring(this.maxNegative)
  }

  get size() {
    return this.strings.size + this.buffers.size
  }

  /** Cached misses held. */
  get negativeSize() {
    return this.negStrings.size + this.negBuffers.size
  }

  /** The live value of `key`, or `miss` when L1 holds nothing valid for it. */
  get(map, k, miss) {
    let hi
    const e = map.get(k)
    if (e === undefined) return miss
    if (Atomics.load(this.stamps, e.stamp) !== e.seen || Atomics.load(this.epoch, 0) !== e.epoch) {
      return this.stale(map, k, miss)
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
        return this.stale(map, k, miss)
      }
    }
    const t = e.tags
    if (t !== null) {
      for (let i = 0; i < t.length; i += 2) {
        if (Atomics.load(e.tagWords, t[i]) !== t[i + 1]) return this.stale(map, k, miss)
      }
    }
    e.hit = 1
    this.hits++
    return handOut(this, e)
  }

  /** Drops the entry of `k` found expired or invalidated; `miss`. */
  stale(map, k, miss) {
    map.delete(k)
    this.staleDrops++
    return miss
  }

  /**
   * CACHED_MISS when L1 holds a valid cached miss of `key` (a string or a
   * Buffer), else undefined.
   */
  negative(key) {
    if (this.maxNegative === 0 || this.negativeSize === 0) return undefined
    const str = typeof key === 'string'
    const map = str ? this.negStrings : this.negBuffers
    const k = str ? key : key.toString('latin1')
    // A cached miss's entry holds null: get() answers it, or undefined.
    return this.get(map, k, undefined) === null ? CACHED_MISS : undefined
  }

  /** What a caller gets of a value this L1 may share with other callers. */
  out(v) {
    return this.copy ? shallow(v) : this.decode ? again(v, this.serializer) : v
  }

  /**
   * Keeps `value` for `key` if the addon's last call said it may (meta word
   * 1), watching the words it named; else drops any entry of `key`. With
   * copy: 'decode', an object is kept as its encoding: `code` and `form` (the
   * JSON text or bytes it was read or written as), or made here when not given.
   */
  keep(key, value, code, form) {
    if (this.max === 0) return
    // No [map, key] pair here: keep() runs on every read below L1.
    const str = typeof key === 'string'
    const map = str ? this.strings : this.buffers
    const k = str ? key : key.toString('latin1')
    if (this.negStrings.size + this.negBuffers.size !== 0) (str ? this.negStrings : this.negBuffers).delete(k)
    if (meta[1] === 0) {
      map.delete(k)
      return
    }
    this.put(map, k, value, code, form, this.queue, this.size, this.tags)
  }

  /**
   * Keeps the cached miss of `key` that the addon's last call found, if it
   * said L1 may (meta words 0 and 1), watching its tags in the cached-miss
   * segment's tag table.
   */
  keepNegative(key) {
    if (this.maxNegative === 0 || meta[0] !== NEGATIVE || meta[1] === 0) return
    const str = typeof key === 'string'
    const k = str ? key : key.toString('latin1')
    ;(str ? this.strings : this.buffers).delete(k)
    this.put(str ? this.negStrings : this.negBuffers, k, null, undefined, undefined, this.negQueue, this.negativeSize, this.negTags)
  }

  /**
   * Puts an entry of `value` for `k` in `map` (of `ring`'s bound, which
   * holds `held` entries), kept as hold() says (`code` and `form` its
   * encoding, if the caller has it), watching the words the meta block names
   * (its tags in the table `tagWords`). A key's entry replaced keeps its
   * place in the queue and its mark, as in the Python front end's L1.
   */
  put(map, k, value, code, form, ring, held, tagWords) {
    const ntags = meta[8]
    const tags = ntags === 0 ? null : Array.from(meta.subarray(9, 9 + 2 * ntags))
    const softLo = meta[6]
    const softHi = meta[7]
    // The deadline on the short clock: 0 for one before its base (so
    // expired), SHORT_MAX for one beyond its range (the long form decides).
    const short = Math.min(Math.max(softLo + softHi * 2 ** 32 - clockBase, 0), SHORT_MAX)
    const old = map.get(k)
    if (old !== undefined) {
      hold(this, old, value, code, form)
      old.stamp = meta[2]
      old.seen = meta[3]
      old.epoch = meta[4]
      old.tags = tags
      old.tagWords = tagWords
      old.timed = (softLo | softHi) !== 0
      old.softLo = softLo
      old.softHi = softHi
      old.short = short
      return
    }
    if (held >= ring.max && ring.evict()) this.evictions++
    const e = {
      map,
      key: k,
      value: undefined,
      code: NOTHING,
      stamp: meta[2],
      seen: meta[3],
      epoch: meta[4],
      tags,
      tagWords,
      timed: (softLo | softHi) !== 0,
      softLo,
      softHi,
      short,
      /** 1 once hit since it was queued, else 0 (CLOCK's mark). */
      hit: 0,
    }
    hold(this, e, value, code, form)
    map.set(k, e)
    ring.push(e)
  }

  drop(key) {
    const str = typeof key === 'string'
    const k = str ? key : key.toString('latin1')
    ;(str ? this.strings : this.buffers).delete(k)
    if (this.negativeSize !== 0) (str ? this.negStrings : this.negBuffers).delete(k)
  }

  clear() {
    this.strings.clear()
    this.buffers.clear()
    this.negStrings.clear()
    this.negBuffers.clear()
    this.queue.clear()
    this.negQueue.clear()
  }
}

module.exports = { L1, meta, shallow, hold, handOut, CACHED_MISS }
