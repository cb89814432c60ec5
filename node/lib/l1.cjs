'use strict'
// This process's L1: live objects, each validated on every hit against words
// of the mapped segment with Atomics.load (the key's stamp, the segment
// epoch, its tags' versions) and its deadline, with no call into the addon.
// Any process's write moves one of those words before it returns, so an
// entry is never served after a write that returned. Bounded by item count;
// the oldest entry is evicted first.

const { performance } = require('node:perf_hooks')

class L1 {
  /**
   * @param {number} max items kept (0: no L1)
   * @param {ArrayBuffer[]} words the stamp table, the tag table and the epoch
   */
  constructor(max, words) {
    this.max = max
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
    if (
      Atomics.load(this.stamps, e.stamp) !== e.seen ||
      Atomics.load(this.epoch, 0) !== e.lo ||
      Atomics.load(this.epoch, 1) !== e.hi ||
      (e.deadline !== 0 && performance.now() >= e.deadline)
    ) {
      map.delete(k)
      return miss
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
    return e.value
  }

  /** Keeps `value` for `key`, watching the words in `keep` (from the addon). */
  set(key, value, keep) {
    if (this.max === 0) return
    const [map, k] = this.where(key)
    if (keep === null || keep === undefined) {
      map.delete(k)
      return
    }
    if (!map.has(k) && this.size >= this.max) this.evict()
    map.set(k, {
      value,
      stamp: keep.stamp,
      seen: keep.seen,
      lo: keep.epochLo,
      hi: keep.epochHi,
      tags: keep.tags.length ? keep.tags : null,
      deadline: keep.freshMs < 0 ? 0 : performance.now() + keep.freshMs,
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

module.exports = { L1 }
