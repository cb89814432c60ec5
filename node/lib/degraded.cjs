'use strict'
// How a cache runs when its shared segment cannot be opened (the `degraded` option), with
// the modes and causes of the Python package and its messages (the engine's rule, which
// both use): 'passthrough' caches nothing, 'local' caches in this process alone for at
// most `degradedTtl`, 'raise' throws.

const { hold, handOut } = require('./l1.cjs')
const { ZigguratError, translate } = require('./errors.cjs')
const native = require('./native.cjs')

const MODES = ['passthrough', 'local', 'raise']

/** `new Cache(..., { degraded: 'raise' })` found the segment unusable. */
class SegmentError extends ZigguratError {
  constructor(message, options) {
    super(message, options)
    this.name = 'SegmentError'
  }
}

/** The error `degraded: 'raise'` throws for cache `name`, whose open failed with `failure`. */
function refusal(name, failure) {
  const err = new SegmentError(native.degradedRefusal(`new Cache(${JSON.stringify(name)})`, failure.reason))
  err.code = failure.cause
  return err
}

/** The warning a cache gives as it starts without its segment. */
function notice(name, failure, mode, degradedTtl) {
  const localTtl = mode === 'passthrough' ? undefined : `degradedTtl=${degradedTtl}`
  return native.degradedWarning(JSON.stringify(name), failure.reason, localTtl)
}

/**
 * The key of a degraded cache's map for `k` (strings and bytes apart, as in L1),
 * checked as the segment would check it.
 *
 * @example
 * mapKey('post:1', 'Cache.get()') // 'spost:1'
 */
function mapKey(k, method) {
  try {
    native.checkKey(k)
  } catch (e) {
    throw translate(e, method)
  }
  return typeof k === 'string' ? `s${k}` : `b${k.toString('latin1')}`
}

const ABSENT = Symbol('absent')

/**
 * The store of a degraded cache: nothing ('passthrough') or this process's own entries,
 * each living at most `degradedTtl` ('local'). Keys are mapKey()'s ('s' + string or 'b' +
 * bytes as latin1); arguments arrive checked.
 */
class Degraded {
  /**
   * @param {'passthrough' | 'local'} mode
   * @param {number} degradedTtl seconds an entry lives at most ('local')
   * @param {number} max entries kept at most (the cache's l1Items)
   * @param {{ copy: 'shared' | 'copy' | 'decode', debug: boolean, serializer: 'auto' | 'msgpack' }} how
   *   what a hit returns, as the L1's: with 'decode', an object is kept as its encoding
   *   (made with the serializer) and each hit decodes it anew, as a read of the segment would
   */
  constructor(mode, degradedTtl, max, how) {
    this.local = mode === 'local' && max > 0
    this.ttl = degradedTtl
    this.max = max
    this.copy = how.copy === 'copy'
    this.decode = how.copy === 'decode'
    this.serializer = how.serializer
    this.debug = how.debug
    /** @type {Map<string, { value: unknown, code: number, expires: number, tags: string[] }>} */
    this.entries = new Map()
    this.hits = 0
    this.misses = 0
    /** Entries dropped to stay within max. */
    this.evictions = 0
  }

  get(k, miss) {
    const e = this.entries.get(k)
    if (e === undefined || e.expires <= performance.now()) {
      if (e !== undefined) this.entries.delete(k)
      this.misses++
      return miss
    }
    this.hits++
    return handOut(this, e)
  }

  set(k, value, ttl, tags) {
    if (!this.local) return
    this.entries.delete(k)
    if (this.entries.size >= this.max) {
      this.entries.delete(this.entries.keys().next().value)
      this.evictions++
    }
    const seconds = Math.min(ttl, this.ttl)
    const e = { value: undefined, code: 0, expires: performance.now() + seconds * 1000, tags: tags ?? [] }
    hold(this, e, value)
    this.entries.set(k, e)
  }

  /** incr without a segment: atomic within this process, as in Python. */
  incr(k, delta, start, tags, key, ttl) {
    const M = 'Cache.incr()'
    const cur = this.get(k, ABSENT)
    let n
    if (cur === ABSENT) {
      n = start + delta
    } else if (typeof cur === 'bigint' || Number.isSafeInteger(cur)) {
      n = BigInt(cur) + delta
    } else {
      throw new TypeError(`${M}: the value of ${JSON.stringify(String(key))} is not an integer`)
    }
    if (n < -(2n ** 63n) || n >= 2n ** 63n) {
      throw new RangeError(`${M}: ${native.incrOverflow(JSON.stringify(String(key)))}`)
    }
    const out = n >= -(2n ** 53n) + 1n && n <= 2n ** 53n - 1n ? Number(n) : n
    this.set(k, out, ttl, cur === ABSENT ? tags : this.entries.get(k)?.tags)
    return out
  }

  delete(k) {
    // As in Python: a degraded delete says false (no process's entry is known to be gone).
    this.entries.delete(k)
    return false
  }

  invalidateTags(tags) {
    const voided = new Set(tags)
    for (const [k, e] of this.entries) {
      if (e.tags.some((t) => voided.has(t))) this.entries.delete(k)
    }
  }

  clear() {
    this.entries.clear()
  }

  get size() {
    return this.entries.size
  }
}

module.exports = { Degraded, SegmentError, MODES, refusal, notice, mapKey }
