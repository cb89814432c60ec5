'use strict'
// The store of a cache with its shared segment, chosen once as the cache
// opens (the other is lib/degraded.cjs's, with the same methods). The L1 hit
// stays in Cache.get(); what L1 does not answer is read here, kept lean: one
// read of the segment through the input block for a string key.

const native = require('./native.cjs')
const args = require('./args.cjs')
const { CODES: { NOTHING, NEGATIVE } } = require('./rules.cjs')
const { decode, FOREIGN } = require('./values.cjs')
const { meta } = require('./l1.cjs')
const { translate } = require('./errors.cjs')
const { Loads } = require('./load.cjs')
const { readString } = require('./read.cjs')
const { segmentStats } = require('./stats.cjs')

/**
 * A cache's segment as its store. `c` gives what it needs of the cache: its
 * addon object (`native`), L1, `writes`, `notes` (lib/load.cjs), serializer,
 * loaderTimeout in seconds, `miss` (the sentinel a read returns for
 * nothing), `plan(options)` (getOrSet's options checked), `closed()` and
 * `open()` (throws once closed).
 *
 * @example
 * const store = new Segment({ native: nc, l1, writes, notes, serializer: 'auto', loaderTimeout: 10, miss, plan, closed, open })
 * store.read('post:1', 'get') // the value, or miss
 */
class Segment {
  degraded = false
  failure = null
  #native
  #slot
  #l1
  #writes
  #miss
  #loads
  /** Values read as misses: bytes that decode to nothing, and values of a kind this package never writes (msgpack beyond plain data). */
  #unread = { decodeErrors: 0, foreign: 0 }

  constructor(c) {
    this.#native = c.native
    this.#slot = c.native.reader()
    this.#l1 = c.l1
    this.#writes = c.writes
    this.#miss = c.miss
    this.#loads = new Loads({ ...c, take: (k, out) => this.take(k, out) })
  }

  /** A read that L1 did not answer for a string key (or any read of a Buffer key): the value or `miss`. */
  read(key, method) {
    if (typeof key === 'string') return this.take(key, readString(this.#native, this.#slot, key, method))
    let out
    const k = args.key(key, `Cache.${method}()`)
    const v = this.#l1.get(this.#l1.buffers, k.toString('latin1'), this.#miss)
    if (v !== this.#miss) return v
    try {
      out = this.#native.read(k)
    } catch (e) {
      throw translate(e, `Cache.${method}()`)
    }
    return this.take(k, out)
  }

  /** The value the addon returned (kept in L1 when the meta words allow), or `miss`. */
  take(key, out) {
    const code = meta[0]
    if (code === NOTHING || code === NEGATIVE) return this.#miss
    const v = decode(out, code)
    if (v === undefined || v === FOREIGN) {
      this.#unread[v === FOREIGN ? 'foreign' : 'decodeErrors']++
      return this.#miss
    }
    // keep() is too large to be inlined: not called for a cache without L1.
    if (this.#l1.max !== 0) this.#l1.keep(key, v, code, out)
    return v
  }

  /** set(): `enc` is the value's encoding (lib/values.cjs); `ttl` undefined for the cache's. */
  set(k, value, ttl, tags, enc, M) {
    try {
      this.#native.store(k, enc[0], enc[1], enc[2], enc[3], enc[4], ttl, tags)
    } catch (e) {
      this.#l1.drop(k)
      throw this.#writes.refused(e, M)
    }
    this.#l1.keep(k, value, enc[0], enc[1] ?? enc[2])
  }

  add(k, value, ttl, tags, enc, M) {
    try {
      return this.#native.add(k, enc[0], enc[1], enc[2], enc[3], enc[4], ttl, tags)
    } catch (e) {
      throw this.#writes.refused(e, M)
    } finally {
      this.#l1.drop(k)
    }
  }

  /** The snapshot a guarded write of `k` compares against, or null (see Cache[SEEN]). */
  seen(k) {
    return this.#native.seen(k)
  }

  /** A write of `k` only while `seen` (of the key `of`) holds; whether it stored. */
  fill(k, ttl, tags, enc, seen, of, M) {
    this.#l1.drop(k)
    try {
      return this.#native.fill(k, enc[0], enc[1], enc[2], ttl, tags, seen, of)
    } catch (e) {
      throw this.#writes.refused(e, M)
    }
  }

  incr(k, delta, start, tags, key, M) {
    this.#l1.drop(k)
    try {
      return this.#native.incr(k, delta, start, tags)
    } catch (e) {
      throw translate(e, M)
    }
  }

  touch(k, ttl, M) {
    this.#l1.drop(k)
    try {
      return this.#native.touch(k, ttl)
    } catch (e) {
      throw this.#writes.refused(e, M)
    }
  }

  delete(k, M) {
    this.#l1.drop(k)
    try {
      return this.#native.delete(k)
    } catch (e) {
      throw this.#writes.refused(e, M)
    }
  }

  invalidateTags(tags, M) {
    try {
      this.#native.invalidateTags(tags)
    } catch (e) {
      throw this.#writes.refused(e, M)
    }
  }

  clear(M) {
    try {
      this.#native.clear()
    } catch (e) {
      throw this.#writes.refused(e, M)
    }
  }

  /** getOrSet's miss: the host's lease (lib/load.cjs). */
  load(k, loader, plan) {
    return this.#loads.get(k, loader, plan)
  }

  /** getOrSet's L1 hit with refreshAhead: the early refresh, when due (lib/load.cjs). */
  refreshHit(k, loader, options, entry) {
    this.#loads.refreshHit(k, loader, options, entry)
  }

  stats(name, mode) {
    return segmentStats(name, this.#l1, this.#native.counts(), this.#unread, this.#writes, mode)
  }

  close() {
    native.forgetReader(this.#slot)
  }

  unlink(M) {
    try {
      this.#native.unlink()
    } catch (e) {
      throw translate(e, M)
    }
  }
}

module.exports = { Segment }
