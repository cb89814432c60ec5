'use strict'
// How a cache runs when its shared segment cannot be opened (the `degraded` option), with
// the modes and causes of the Python package and its messages (the engine's rule, which
// both use): 'passthrough' caches nothing, 'local' caches in this process alone for at
// most `degradedTtl`, 'raise' throws.

const { hold, handOut } = require('./l1.cjs')
const { ZigguratError, translate } = require('./errors.cjs')
const native = require('./native.cjs')
const { MODES: ALL_MODES } = require('./rules.cjs')
const args = require('./args.cjs')
const { encode, stored } = require('./values.cjs')
const { Flights, loaderContext } = require('./load.cjs')
const { degradedStats } = require('./stats.cjs')

const MODES = ALL_MODES.degraded

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
  const localTtl = mode === 'passthrough' ? undefined : degradedTtl
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
 * The store of a degraded cache, chosen once as the cache opens (the other is
 * lib/segment.cjs's, with the same methods): nothing ('passthrough') or this
 * process's own entries, each living at most `degradedTtl` ('local'). Its
 * map's keys are mapKey()'s ('s' + string or 'b' + bytes as latin1).
 *
 * @example
 * const store = new Degraded({ name: 'blog', failure, mode: 'local', degradedTtl: 1, max: 10_000, copy: 'shared',
 *   debug: false, serializer: 'auto', ttl: 300, loaderTimeout: 10, writes, notes, miss, out, closed })
 * store.set('post:1', { title: 'Hello' }, undefined, undefined, null, 'Cache.set()')
 */
class Degraded {
  degraded = true
  #flights
  #c
  /** Loads, failed loads and their seconds (the addon counts a segment's). */
  loads = 0
  loadErrors = 0
  loadSeconds = 0
  loadMaxSeconds = 0

  /**
   * @param {object} c the cache's: `failure` ({ cause, reason }), `mode`
   *   ('passthrough' or 'local'), `degradedTtl` (seconds an entry lives at
   *   most), `max` (entries kept at most: l1Items), `copy` and `debug` (what a
   *   hit returns, as the L1's: with 'decode', an object is kept as its
   *   encoding, made with `serializer`, and each hit decodes it anew, as a
   *   read of the segment would), `ttl` and `loaderTimeout` in seconds,
   *   `writes`, `notes` (lib/load.cjs), `miss`, `out(v)` (a shared load's
   *   value handed out) and `closed()`
   */
  constructor(c) {
    this.#c = c
    this.failure = c.failure
    this.local = c.mode === 'local' && c.max > 0
    this.ttl = c.degradedTtl
    this.max = c.max
    this.copy = c.copy === 'copy'
    this.decode = c.copy === 'decode'
    this.serializer = c.serializer
    this.debug = c.debug
    /** @type {Map<string, { value: unknown, code: number, expires: number, tags: string[] }>} */
    this.entries = new Map()
    this.hits = 0
    this.misses = 0
    /** Entries dropped to stay within max. */
    this.evictions = 0
    this.#flights = new Flights(c.out)
  }

  /** The entry of map key `mk`, or `miss`. */
  #get(mk, miss) {
    const e = this.entries.get(mk)
    if (e === undefined || e.expires <= performance.now()) {
      if (e !== undefined) this.entries.delete(mk)
      this.misses++
      return miss
    }
    this.hits++
    return handOut(this, e)
  }

  #put(mk, value, ttl, tags) {
    if (!this.local) return
    this.entries.delete(mk)
    if (this.entries.size >= this.max) {
      this.entries.delete(this.entries.keys().next().value)
      this.evictions++
    }
    const seconds = Math.min(ttl, this.ttl)
    const e = { value: undefined, code: 0, expires: performance.now() + seconds * 1000, tags: tags ?? [] }
    hold(this, e, value)
    this.entries.set(mk, e)
  }

  /** The value of `key` (checked by type), or the cache's miss sentinel. */
  read(key, method) {
    const M = `Cache.${method}()`
    return this.#get(mapKey(args.key(key, M), M), this.#c.miss)
  }

  set(k, value, ttl, tags, enc, M) {
    this.#put(mapKey(k, M), value, ttl ?? this.#c.ttl, tags)
  }

  /** Atomic within this process only; passthrough keeps nothing, so every add stores. */
  add(k, value, ttl, tags, enc, M) {
    const mk = mapKey(k, M)
    if (this.#get(mk, ABSENT) !== ABSENT) return false
    this.#put(mk, value, ttl ?? this.#c.ttl, tags)
    return true
  }

  /** incr without a segment: atomic within this process, as in Python. */
  /** No segment, no snapshot: ziggurat/http writes plainly instead (see lib/http/store.cjs). */
  seen() {
    return null
  }

  fill() {
    return false
  }

  incr(k, delta, start, tags, key, M) {
    const mk = mapKey(k, M)
    const cur = this.#get(mk, ABSENT)
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
    this.#put(mk, out, this.#c.ttl, cur === ABSENT ? tags : this.entries.get(mk)?.tags)
    return out
  }

  touch(k, ttl, M) {
    const mk = mapKey(k, M)
    const cur = this.#get(mk, ABSENT)
    if (cur === ABSENT) return false
    this.#put(mk, cur, ttl ?? this.#c.ttl, this.entries.get(mk)?.tags)
    return true
  }

  delete(k, M) {
    // As in Python: a degraded delete says false (no process's entry is known to be gone).
    this.entries.delete(mapKey(k, M))
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

  /** getOrSet's miss: this process's entry ('local'), else the loader, one per key at a time. */
  load(k, loader, plan) {
    return this.#flights.share(k, () => this.#load(k, loader, plan))
  }

  /** A loader's result 'local' keeps (undefined or null is not cached, as in Python). */
  async #load(key, loader, plan) {
    const c = this.#c
    const M = 'Cache.getOrSet()'
    const mk = mapKey(key, M)
    const v = this.#get(mk, c.miss)
    if (v !== c.miss) return v
    this.loads++
    const t0 = performance.now()
    let value
    const { ctx, said } = loaderContext(AbortSignal.timeout(c.loaderTimeout * 1000))
    try {
      value = await loader(ctx)
    } catch (e) {
      this.loadErrors++
      throw e
    } finally {
      const seconds = (performance.now() - t0) / 1000
      this.loadSeconds += seconds
      this.loadMaxSeconds = Math.max(this.loadMaxSeconds, seconds)
    }
    if (value === undefined || value === null) return undefined
    if (this.local && !c.closed() && !said.skip) {
      try {
        value = stored(encode(value, M, c.serializer), value)
        this.#put(mk, value, said.ttl ?? plan.ttl ?? c.ttl, said.tags ?? plan.tags)
      } catch (e) {
        c.notes.notStored(key, e)
      }
    }
    return value
  }

  /** No L1 entry of a degraded cache answers a getOrSet, so none refreshes early. */
  refreshHit() {}

  stats(name, mode) {
    return degradedStats(name, this, this.#c.writes, this.failure, mode)
  }

  close() {
    this.entries.clear()
  }

  unlink(M) {
    throw new ZigguratError(
      `${M}: cache ${JSON.stringify(this.#c.name)} runs without its segment (${this.failure.reason}); ` +
        'once the cause is fixed, a Cache opened again can unlink() its files',
    )
  }

  get size() {
    return this.entries.size
  }
}

module.exports = { Degraded, SegmentError, MODES, refusal, notice, mapKey }
