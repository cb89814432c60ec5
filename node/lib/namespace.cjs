'use strict'
// A namespace of a Cache (Cache.namespace()): the same keys and hidden tag as
// Python's namespaces, so that a namespace of either language sees the other's
// entries and clears them.

const args = require('./args.cjs')
const { keyList, entryList } = require('./many.cjs')
const { memoize } = require('./memoize.cjs')

/**
 * Keys under a prefix of one cache, cleared together: key `k` is the cache's
 * `prefix:k`, and every entry written through it carries a hidden tag.
 *
 * @example
 * const users = cache.namespace('users'); users.set('1', 'ada'); users.clear()
 */
class Namespace {
  #cache
  #prefix
  #tag

  /** `parts`: the key prefix and hidden tag of the Cache's rule (`native.namespaceParts`). */
  constructor(cache, prefix, [keyPrefix, tag]) {
    this.#cache = cache
    this.#prefix = keyPrefix
    this.#tag = tag
    /** The namespace's name. */
    this.prefix = prefix
  }

  #k(key, method) {
    const k = args.key(key, `Namespace.${method}()`)
    return typeof k === 'string' ? this.#prefix + k : Buffer.concat([Buffer.from(this.#prefix), k])
  }

  #o(options, method, allowed) {
    const o = args.options(options, `Namespace.${method}()`, allowed)
    const tags = args.tags(o.tags, `Namespace.${method}()`) ?? []
    return { ...o, tags: [...tags, this.#tag] }
  }

  /** @example ns.get('1') */
  get(key) {
    return this.#cache.get(this.#k(key, 'get'))
  }

  /** @example ns.has('1') */
  has(key) {
    return this.#cache.has(this.#k(key, 'has'))
  }

  /** @example ns.set('1', { a: 1 }, { ttl: 60 }) */
  set(key, value, options) {
    return this.#cache.set(this.#k(key, 'set'), value, this.#o(options, 'set', args.SET_OPTIONS))
  }

  /** @example ns.add('1', 1) */
  add(key, value, options) {
    return this.#cache.add(this.#k(key, 'add'), value, this.#o(options, 'add', args.SET_OPTIONS))
  }

  /** @example ns.incr('hits') */
  incr(key, delta = 1, options) {
    return this.#cache.incr(this.#k(key, 'incr'), delta, this.#o(options, 'incr', args.INCR_OPTIONS))
  }

  /** @example ns.touch('1', { ttl: 60 }) */
  touch(key, options) {
    return this.#cache.touch(this.#k(key, 'touch'), options)
  }

  /** @example ns.delete('1') */
  delete(key) {
    return this.#cache.delete(this.#k(key, 'delete'))
  }

  /** @example await ns.getOrSet('1', () => load(1)) */
  getOrSet(key, loader, options) {
    let k, o
    try {
      k = this.#k(key, 'getOrSet')
      o = this.#o(options, 'getOrSet', args.GET_OR_SET_OPTIONS)
    } catch (e) {
      return Promise.reject(e)
    }
    return this.#cache.getOrSet(k, loader, o)
  }

  // -- Many keys at once, decr, memoize ------------------------------------

  /** The values of the namespace's `keys` that are present, by key. @example ns.getMany(['1', '2']) */
  getMany(keys) {
    const list = keyList(keys, 'Namespace.getMany()')
    const full = list.map((k) => this.#k(k, 'getMany'))
    const found = this.#cache.getMany(full)
    // A cache joined to Redis answers with a promise.
    if (found instanceof Promise) return found.then((f) => this.#byKey(list, full, f))
    return this.#byKey(list, full, found)
  }

  /** The values `found` under the full keys, by the namespace's keys. */
  #byKey(list, full, found) {
    const out = new Map()
    for (let i = 0; i < list.length; i++) {
      if (found.has(full[i])) out.set(list[i], found.get(full[i]))
    }
    return out
  }

  /** @example ns.setMany({ 1: 'a', 2: 'b' }, { ttl: 60 }) */
  setMany(entries, options) {
    const pairs = entryList(entries, 'Namespace.setMany()')
    return this.#cache.setMany(
      pairs.map(([k, v]) => [this.#k(k, 'setMany'), v]),
      this.#o(options, 'setMany', args.SET_OPTIONS),
    )
  }

  /** @example ns.deleteMany(['1', '2']) // 2 */
  deleteMany(keys) {
    const list = keyList(keys, 'Namespace.deleteMany()')
    return this.#cache.deleteMany(list.map((k) => this.#k(k, 'deleteMany')))
  }

  /** @example ns.decr('stock', 2) */
  decr(key, delta = 1, options) {
    return this.#cache.decr(this.#k(key, 'decr'), delta, this.#o(options, 'decr', args.INCR_OPTIONS))
  }

  /** @example const user = ns.memoize(async (id) => db.user(id), { ttl: 60 }) */
  memoize(fn, options) {
    return memoize(this, fn, options, 'Namespace.memoize()')
  }

  /** Voids every entry of the namespace, in every process. @example ns.clear() */
  clear() {
    return this.#cache.invalidateTags(this.#tag)
  }
}

module.exports = { Namespace }
