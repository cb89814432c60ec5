'use strict'
// A Keyv storage adapter over a ziggurat Cache, so that Keyv, cache-manager, cacheable
// and NestJS's cache module use the host's shared cache by configuration.

const { EventEmitter } = require('node:events')
const { Cache } = require('./cache.cjs')

/** The hidden tag of every entry a Keyv namespace writes, which its clear() voids. */
function namespaceTag(namespace) {
  return `\u0000keyv:${namespace ?? ''}`
}

/**
 * Keyv's store contract over a ziggurat `Cache`: every process of the host that opens
 * the same cache sees the others' writes. Keyv gives TTLs in milliseconds (none: kept
 * until evicted), prefixes keys with its namespace and sets `namespace` here, so that
 * `clear()` voids that namespace's entries alone.
 *
 * @example
 * import Keyv from 'keyv'
 * import { KeyvZiggurat } from 'ziggurat/keyv'
 * const keyv = new Keyv({ store: new KeyvZiggurat('sessions', { size: '64MiB' }) })
 * await keyv.set('s:1', { user: 7 }, 60_000)
 */
class KeyvZiggurat extends EventEmitter {
  #cache
  #own

  /**
   * @param {Cache | string} cache an open Cache, or the name of one to open (closed
   *   by `disconnect()`)
   * @param {object} [options] the Cache's options when `cache` is a name
   */
  constructor(cache, options) {
    super()
    if (cache instanceof Cache) {
      if (options !== undefined) {
        throw new TypeError('new KeyvZiggurat(): options are for a cache given by name; this Cache is open already')
      }
      this.#cache = cache
      this.#own = false
    } else if (typeof cache === 'string') {
      this.#cache = new Cache(cache, options)
      this.#own = true
    } else {
      throw new TypeError(
        `new KeyvZiggurat(): cache must be a Cache or the name of one, not ${cache === null ? 'null' : typeof cache}`,
      )
    }
    /** What Keyv reads as the adapter's options. */
    this.opts = { name: this.#cache.name, ...(options ?? {}) }
    /** The Keyv namespace (set by Keyv); its keys arrive prefixed with it. */
    this.namespace = undefined
  }

  /** The Cache under the adapter. @example store.cache.stats() */
  get cache() {
    return this.#cache
  }

  /** @example await store.get('keyv:a') */
  async get(key) {
    return this.#cache.get(key)
  }

  /** @example await store.getMany(['keyv:a', 'keyv:b']) */
  async getMany(keys) {
    // A cache joined to the cluster tier answers with promises.
    return Promise.all(keys.map((k) => this.#cache.get(k)))
  }

  /**
   * Stores `value` for `ttl` milliseconds (none or 0: until evicted).
   *
   * @example
   * await store.set('keyv:a', '{"value":1}', 1000)
   */
  async set(key, value, ttl) {
    if (ttl !== undefined && ttl !== null && (typeof ttl !== 'number' || !(ttl >= 0))) {
      throw new RangeError(`KeyvZiggurat.set(): ttl must be a number of milliseconds >= 0, got ${String(ttl)}`)
    }
    const seconds = ttl ? ttl / 1000 : Infinity
    await this.#cache.set(key, value, { ttl: seconds, tags: [namespaceTag(this.namespace)] })
    return true
  }

  /** @example await store.setMany([{ key: 'keyv:a', value: '1', ttl: 1000 }]) */
  async setMany(entries) {
    for (const { key, value, ttl } of entries) await this.set(key, value, ttl)
  }

  /** Whether there was a value. @example await store.delete('keyv:a') */
  async delete(key) {
    return this.#cache.delete(key)
  }

  /** Whether every key held a value. @example await store.deleteMany(['keyv:a']) */
  async deleteMany(keys) {
    let all = true
    for (const k of keys) all = (await this.#cache.delete(k)) && all
    return all
  }

  /** @example await store.has('keyv:a') */
  async has(key) {
    return this.#cache.has(key)
  }

  /** @example await store.hasMany(['keyv:a']) */
  async hasMany(keys) {
    return keys.map((k) => this.#cache.has(k))
  }

  /**
   * Voids the entries of this namespace, in every process (the Cache's other entries stay).
   *
   * @example
   * await store.clear()
   */
  async clear() {
    await this.#cache.invalidateTags(namespaceTag(this.namespace))
  }

  /** Closes the cache if the adapter opened it. @example await store.disconnect() */
  async disconnect() {
    if (this.#own) this.#cache.close()
  }
}

module.exports = { KeyvZiggurat }
module.exports.default = KeyvZiggurat
