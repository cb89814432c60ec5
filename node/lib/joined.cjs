'use strict'
// A cache joined to the cluster tier (`redis`): Redis or Valkey under every
// host. The tier is the addon's (ziggurat-cluster: the signed values, the
// invalidation stream and its reader, the write-time rules); each of its
// calls runs on the addon's own threads and settles a promise, so no call
// waits on Redis on the event loop. Reads answer from this process's L1 and
// the host's segment first and ask Redis only after a miss; writes go to
// Redis first, then to the host (the tier writes it), and to the host alone
// when Redis cannot take them (the tier then clears every host once Redis is
// back, see docs/cluster.md).

const native = require('./native.cjs')
const { CODES: { NEGATIVE } } = require('./rules.cjs')
const { decode, FOREIGN } = require('./values.cjs')
const { meta } = require('./l1.cjs')
const { translate } = require('./errors.cjs')

/**
 * The tier of one cache: `c` gives its addon object (`native`), L1 and
 * `store` (its Segment, for the host-alone writes).
 *
 * @example
 * const joined = new Joined(c, { urls: ['redis://10.0.0.5:6379/0'], cluster: false, secrets, timeout: 0.1, streamLength: 100000, singleFlight: false }, warn)
 * await joined.miss('post:1', 'get') // after a miss in L1 and the segment
 */
class Joined {
  #c
  /** The addon's NativeTier. */
  tier

  constructor(c, options, warn) {
    this.#c = c
    try {
      this.tier = native.NativeTier.join(c.native, options, (message) => warn(message))
    } catch (e) {
      throw translate(e, 'new Cache()')
    }
  }

  /**
   * get() after a miss in this process's L1 and the host's segment (`meta`
   * says which): the value Redis holds, or undefined; a cached miss does not
   * ask Redis.
   */
  async miss(key, method) {
    if (meta[0] === NEGATIVE) return undefined
    let found
    try {
      found = await this.tier.get(key)
    } catch (e) {
      throw translate(e, `Cache.${method}()`)
    }
    return this.value(found)
  }

  /** A value found in Redis (`{ code, value }`, or null) as JavaScript's, or undefined. */
  value(found) {
    if (found === null) return undefined
    const v = decode(found.value, found.code)
    return v === FOREIGN ? undefined : v
  }

  async set(k, value, ttl, tags, enc, M) {
    const done = await this.#call(M, () => this.tier.set(k, enc[0], enc[1], enc[2], enc[3], enc[4], ttl, tags))
    this.#c.l1.drop(k)
    if (!done) this.#c.store.set(k, value, ttl, tags, enc, M)
  }

  async add(k, value, ttl, tags, enc, M) {
    const stored = await this.#call(M, () => this.tier.add(k, enc[0], enc[1], enc[2], enc[3], enc[4], ttl, tags))
    this.#c.l1.drop(k)
    return stored ?? this.#c.store.add(k, value, ttl, tags, enc, M)
  }

  async incr(k, delta, start, tags, key, M) {
    const n = await this.#call(M, () => this.tier.incr(k, delta, start, tags))
    this.#c.l1.drop(k)
    return n ?? this.#c.store.incr(k, delta, start, tags, key, M)
  }

  async touch(k, ttl, M) {
    const held = await this.#call(M, () => this.tier.touch(k, ttl))
    this.#c.l1.drop(k)
    return held ?? this.#c.store.touch(k, ttl, M)
  }

  async delete(k, M) {
    const held = await this.#call(M, () => this.tier.delete(k))
    // Redis's copy is gone; the host's own is this process's to delete.
    return this.#c.store.delete(k, M) || held
  }

  async invalidateTags(tags, M) {
    await this.#call(M, () => this.tier.invalidateTags(tags))
  }

  async clear(M) {
    this.#c.l1.clear()
    await this.#call(M, () => this.tier.clear())
  }

  /** The tier's call `f` for method `M`: its errors as this package's. */
  async #call(M, f) {
    try {
      return await f()
    } catch (e) {
      throw translate(e, M)
    }
  }

  /** stats().l3: this process's counters of the tier and its connection, and the host's figures. */
  stats() {
    // The crate's tables name their figures in snake_case: this package's names are camelCase.
    const { counts, host, ...link } = this.tier.counts()
    const out = {}
    for (const [name, v] of [...Object.entries(counts), ...Object.entries(link), ...Object.entries(host)]) {
      out[name.replace(/_(.)/g, (_, c) => c.toUpperCase())] = v
    }
    return out
  }

  close() {
    this.tier.close()
  }
}

module.exports = { Joined }
