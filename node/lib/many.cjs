'use strict'
// The methods taking many keys (getMany, setMany, deleteMany): their
// arguments, each checked before anything is read or written, so that bad
// input anywhere changes nothing (as Python's get_many, set_many and
// delete_many), then each key as the single-key methods do it.

const args = require('./args.cjs')
const native = require('./native.cjs')
const { translate } = require('./errors.cjs')
const { encode, stored } = require('./values.cjs')
const { SET_OPTIONS } = args

// A string of up to this many UTF-16 units has at most 3 bytes of UTF-8 per unit.
const SURE_CHARS = Math.floor(native.MAX_KEY_BYTES / 3)

/**
 * A key checked by type here and by the Cache's rule (1 to MAX_KEY_BYTES
 * bytes) in the addon, which is asked only about a key that may break it.
 */
function checked(k, M) {
  const key = args.key(k, M)
  const n = key.length
  if (n === 0 || n > (typeof key === 'string' ? SURE_CHARS : native.MAX_KEY_BYTES)) {
    try {
      native.checkKey(key)
    } catch (e) {
      throw translate(e, M)
    }
  }
  return key
}

/** Whether `v` is a single key, which a method taking many refuses. */
function single(v) {
  return typeof v === 'string' || v instanceof Uint8Array
}

/**
 * The keys of a method taking many: an iterable of keys (an array, a Set, a
 * Map's keys()...), each checked.
 *
 * @example
 * keyList(['a', 'b'], 'Cache.getMany()') // ['a', 'b']
 */
function keyList(keys, M) {
  if (single(keys)) throw new TypeError(`${M}: keys must be an iterable of keys, not a single key`)
  if (keys === null || keys === undefined || typeof keys[Symbol.iterator] !== 'function') {
    throw new TypeError(`${M}: keys must be an iterable of keys (an array, a Set...), not ${args.typeName(keys)}`)
  }
  const out = []
  for (const k of keys) out.push(checked(k, M))
  return out
}

/**
 * The [key, value] pairs of setMany: a Map, a plain object, or an iterable of
 * [key, value] pairs; each key checked.
 *
 * @example
 * entryList({ a: 1 }, 'Cache.setMany()') // [['a', 1]]
 */
function entryList(entries, M) {
  if (single(entries) || entries === null || typeof entries !== 'object') {
    throw new TypeError(
      `${M}: entries must be a Map, an object or an iterable of [key, value] pairs, not ${args.typeName(entries)}`,
    )
  }
  const pairs = typeof entries[Symbol.iterator] === 'function' ? entries : Object.entries(entries)
  const out = []
  for (const p of pairs) {
    if (!Array.isArray(p) || p.length !== 2) {
      throw new TypeError(`${M}: each entry must be a [key, value] pair, not ${args.typeName(p)}`)
    }
    out.push([checked(p[0], M), p[1]])
  }
  return out
}

/**
 * The methods taking many keys of one Cache. `cache` gives what they need of
 * it: its store (lib/segment.cjs or lib/degraded.cjs), serializer, `miss`
 * (the sentinel of `get`), `get(key, method)` (a read through L1, or `miss`)
 * and `tier()`: its cluster tier (lib/joined.cjs), or null. With a tier, each
 * method returns a promise, its keys' calls made one after the other.
 *
 * @example
 * const many = new Many({ store, serializer: 'auto', miss, get })
 * many.getMany(['a', 'b']) // Map(1) { 'a' => 1 }
 */
class Many {
  #c

  constructor(cache) {
    this.#c = cache
  }

  getMany(keys) {
    const M = 'Cache.getMany()'
    const c = this.#c
    const list = keyList(keys, M)
    const tier = c.tier()
    if (tier !== null) return this.#joinedGet(tier, list)
    const out = new Map()
    for (const k of list) {
      const v = c.get(k, 'getMany')
      if (v !== c.miss) out.set(k, v)
    }
    return out
  }

  setMany(entries, options) {
    const M = 'Cache.setMany()'
    const c = this.#c
    const pairs = entryList(entries, M)
    const o = args.options(options, M, SET_OPTIONS)
    const ttl = args.optionalDuration(o.ttl, M, 'ttl')
    const tags = args.tags(o.tags, M)
    const encoded = pairs.map(([k, value]) => {
      try {
        return encode(value, M, c.serializer)
      } catch (e) {
        const what = typeof k === 'string' ? JSON.stringify(k) : `0x${k.toString('hex')}`
        e.message = `${e.message} (the value of ${what})`
        throw e
      }
    })
    const tier = c.tier()
    if (tier !== null) return this.#joinedSet(tier, pairs, encoded, ttl, tags, M)
    for (let i = 0; i < pairs.length; i++) {
      c.store.set(pairs[i][0], stored(encoded[i], pairs[i][1]), ttl, tags, encoded[i], M)
    }
  }

  async #joinedGet(tier, list) {
    const c = this.#c
    const out = new Map()
    for (const k of list) {
      let v = c.get(k, 'getMany')
      if (v === c.miss) v = (await tier.miss(k, 'getMany')) ?? c.miss
      if (v !== c.miss) out.set(k, v)
    }
    return out
  }

  async #joinedSet(tier, pairs, encoded, ttl, tags, M) {
    for (let i = 0; i < pairs.length; i++) {
      await tier.set(pairs[i][0], stored(encoded[i], pairs[i][1]), ttl, tags, encoded[i], M)
    }
  }

  async #joinedDelete(tier, list, M) {
    let n = 0
    for (const k of list) if (await tier.delete(k, M)) n++
    return n
  }

  deleteMany(keys) {
    const M = 'Cache.deleteMany()'
    const c = this.#c
    const list = keyList(keys, M)
    const tier = c.tier()
    if (tier !== null) return this.#joinedDelete(tier, list, M)
    let n = 0
    for (const k of list) if (c.store.delete(k, M)) n++
    return n
  }
}

module.exports = { Many, keyList, entryList }
