'use strict'
// How an HttpCache reads and writes responses through its Cache: the reads
// through the cache's L1, the writes of a fill checked against the snapshot
// taken before the app rendered (a purge, a clear or an invalidation of the
// response's tags that returned meanwhile keeps the page out), purges. What
// to read and write is ziggurat-http's; this file does the I/O.

const { randomBytes } = require('node:crypto')
const native = require('../native.cjs')
const { SEEN, FILL } = require('../symbols.cjs')

/** The snapshot of a cache with no segment: its fills are plain writes. */
const UNGUARDED = Symbol('unguarded')

class Store {
  constructor(cache) {
    this.cache = cache
  }

  /** The value bytes under `key`, or null (nothing, or a value no response is). */
  get(key) {
    const v = this.cache.get(key)
    return Buffer.isBuffer(v) ? v : null
  }

  /**
   * What a fill of the URL keyed `base` must find unchanged to store, taken
   * before the app is called: UNGUARDED without a segment, null while a
   * write of the URL is in progress (nothing may be stored then).
   */
  snapshot(base) {
    if (this.cache.degraded) return UNGUARDED
    return this.cache[SEEN](native.httpPurgeMark(base))
  }

  /** One write of a fill: plain when unguarded, else only while `seen` holds. */
  put(base, w, seen) {
    if (seen === UNGUARDED) {
      this.cache.set(w.key, w.value, { ttl: w.ttl, tags: w.tags })
      return true
    }
    if (seen === null) return false
    return this.cache[FILL](w.key, w.value, w.ttl, w.tags, seen, native.httpPurgeMark(base))
  }

  /** The writes of a fill, in order, stopping at the first that does not store; whether all stored. */
  save(base, writes, seen) {
    for (const w of writes) if (!this.put(base, w, seen)) return false
    return true
  }

  /** Whether the writes of a fill are checked against a snapshot. */
  guarded(seen) {
    return seen !== UNGUARDED
  }

  /** Six random bytes, for a new generation of a URL's variants. */
  fresh() {
    return randomBytes(6)
  }

  /** Purges the URL keyed `base` in every process of the host; whether something was stored. */
  purgeKey(base) {
    let found = false
    for (const k of native.httpPurgeKeys(base)) found = this.cache.delete(k)
    return found
  }

  /** Invalidates `tags` in every process of the host. */
  invalidateTags(tags) {
    this.cache.invalidateTags(tags)
  }
}

module.exports = { Store, UNGUARDED }
