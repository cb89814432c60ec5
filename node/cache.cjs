'use strict'
// The ziggurat Cache for Node.js: a per-process L1 of live objects over the
// host's shared-memory segment, which every worker process of the host (of
// Node.js or Python) attaches to by name. See docs/node.md.
//
// This file is the Cache's public surface and its L1 hit. Below L1, a cache
// has one store, chosen once as it opens: its segment (lib/segment.cjs, with
// getOrSet's loads in lib/load.cjs) or, when the segment cannot be used, the
// degraded store (lib/degraded.cjs); the two have the same methods, so no
// call asks which one it has. Namespaces are in lib/namespace.cjs, stats()
// in lib/stats.cjs.

const native = require('./lib/native.cjs')
const args = require('./lib/args.cjs')
const { MAX_TAGS } = require('./lib/rules.cjs')
const { encode, stored } = require('./lib/values.cjs')
const { L1 } = require('./lib/l1.cjs')
const { ZigguratError, LoadTimeoutError, WriteErrors, translate } = require('./lib/errors.cjs')
const { Degraded, SegmentError, refusal, notice } = require('./lib/degraded.cjs')
const { Segment } = require('./lib/segment.cjs')
const { Joined } = require('./lib/joined.cjs')
const { cacheOptions } = require('./lib/options.cjs')
const { KeyNotes } = require('./lib/load.cjs')
const { Namespace } = require('./lib/namespace.cjs')
const { Many } = require('./lib/many.cjs')
const { memoize } = require('./lib/memoize.cjs')
const { SEEN, FILL, JOINED } = require('./lib/symbols.cjs')
const { SET_OPTIONS, GET_OR_SET_OPTIONS, INCR_OPTIONS, TOUCH_OPTIONS, int64 } = args

const MISS = Symbol('miss')
// The files whose size this process warned about: once each, however often a cache opens them.
const RESIZED = new Set()

/**
 * A cache shared by every process of the host that opens the same name.
 *
 * @example
 * const cache = new Cache('blog', { size: '256MiB', ttl: '5m' })
 * cache.set('post:1', { title: 'Hello' }, { tags: ['posts'] })
 * cache.get('post:1') // { title: 'Hello' }
 */
class Cache {
  #native
  #l1
  #closed = false
  /** @type {Segment | Degraded} what L1 does not answer, chosen as the cache opens */
  #store
  /** @type {Many} getMany, setMany and deleteMany */
  #many
  #mode
  #writes = new WriteErrors()
  /** 'auto' or 'msgpack': how values that are not counters are encoded. */
  #serializer
  /** The refreshAhead option (0: getOrSet never refreshes early). */
  #refreshAhead
  /** @type {Joined | null} the cluster tier, with the `redis` option (its methods return promises) */
  #tier = null
  /** Closed, or joined to the cluster tier: get() leaves its synchronous path. */
  #aside = false

  /**
   * Opens (or creates) the cache `name` in `directory` (default /dev/shm).
   *
   * @param {string} name 1-80 characters of A-Z a-z 0-9 . _ - not starting with '.'
   * @param {object} [options] see docs/node.md for each option and its default
   */
  constructor(name, options) {
    const M = 'new Cache()'
    if (typeof name !== 'string') {
      throw new TypeError(`${M}: name must be a string, not ${args.typeName(name)}`)
    }
    const o = cacheOptions(options)
    this.#serializer = o.serializer
    try {
      this.#native = new native.NativeCache(name, o.open)
    } catch (e) {
      throw translate(e, M)
    }
    const { ttl, refreshAhead, degradedTtl, l1Items, l1NegativeItems, copy, loaderTimeout, serializer } = o
    const failure = this.#native.failure
    const mode = failure && !o.modeChosen ? native.unsetDegradedMode(failure.cause, o.mode) : o.mode
    this.#mode = mode
    this.#refreshAhead = refreshAhead
    const warn = o.warn
    if (failure && mode === 'raise') throw refusal(name, failure)
    if (this.#native.notice) warn(this.#native.notice)
    const resized = this.#native.resized
    if (resized && !RESIZED.has(resized)) {
      RESIZED.add(resized)
      warn(resized)
    }
    // A degraded cache reads no words of a segment: its L1 keeps nothing.
    const words = l1Items > 0 && !failure ? native.buffers.words(this.#native) : null
    this.#l1 = new L1(
      words ? l1Items : 0,
      words ?? [new ArrayBuffer(4), new ArrayBuffer(4), new ArrayBuffer(8), new ArrayBuffer(4)],
      copy,
      o.debug,
      l1NegativeItems,
      serializer,
    )
    const c = {
      name,
      native: this.#native,
      l1: this.#l1,
      ttl,
      loaderTimeout,
      serializer,
      writes: this.#writes,
      notes: new KeyNotes(name, this.#writes, warn),
      miss: MISS,
      plan: (options) => this.#plan(options),
      closed: () => this.#closed,
      open: () => this.#open('getOrSet'),
      tier: () => this.#tier,
    }
    if (failure) {
      // A process stays degraded until it opens the cache again (in practice, restarts).
      const out = (v) => this.#l1.out(v)
      this.#store = new Degraded({ ...c, failure, mode, degradedTtl, max: l1Items, copy, debug: o.debug, out })
      warn(notice(name, failure, mode, degradedTtl))
      // The tier keeps its words in the segment: without one, this process caches alone.
      if (o.tier !== null) warn(`cache ${JSON.stringify(name)}: no shared segment, so no cluster tier either (${failure.reason})`)
    } else {
      this.#store = new Segment(c)
      if (o.tier !== null) {
        const t = { native: this.#native, l1: this.#l1, store: this.#store }
        try {
          this.#tier = new Joined(t, o.tier, warn)
          this.#aside = true
        } catch (e) {
          this.#store.close()
          this.#native.close()
          throw e
        }
      }
    }
    this.#many = new Many({
      store: this.#store,
      serializer,
      miss: MISS,
      get: (k, method) => this.#get(k, method),
      tier: () => this.#tier,
    })
    /** The cache's name. */
    this.name = name
    Object.defineProperty(this, 'name', { writable: false })
  }

  /**
   * Whether the cache runs without its shared segment (see the `degraded` option).
   *
   * @example
   * new Cache('x', { directory: '/missing' }).degraded // true, with a ZigguratWarning
   */
  get degraded() {
    return this.#store.degraded
  }

  /**
   * Why the segment cannot be used (naming the file and the remedy), or null.
   *
   * @example
   * cache.degradedReason // 'directory /missing does not exist: ...' or null
   */
  get degradedReason() {
    return this.#store.failure?.reason ?? null
  }

  /**
   * The same as a short stable name (missing_directory, not_writable, other_owner,
   * no_space, damaged, incompatible, locked, no_huge_pages, unsupported_platform, io), or null.
   *
   * @example
   * cache.degradedCause // 'missing_directory' or null
   */
  get degradedCause() {
    return this.#store.failure?.cause ?? null
  }

  /** Where writes go: the cluster tier (promises), else the cache's store. */
  get #writer() {
    return this.#tier ?? this.#store
  }

  #open(method) {
    if (this.#closed) {
      throw new ZigguratError(`Cache.${method}(): cache ${JSON.stringify(this.name)} is closed`)
    }
  }

  /**
   * The value of `key`: this process's L1, else one read of the host's
   * segment; `undefined` when absent. Synchronous.
   *
   * @example
   * cache.get('post:1') // { title: 'Hello' } or undefined
   */
  get(key) {
    // The L1 hit is the common case: checked here, with no call but the L1's
    // (none for a cache without L1), after one test that sets a closed or
    // joined cache aside.
    if (this.#aside) return this.#getAside(key)
    if (typeof key === 'string' && this.#l1.max !== 0) {
      const v = this.#l1.get(this.#l1.strings, key, MISS)
      if (v !== MISS) return v
    }
    const v = this.#store.read(key, 'get')
    return v === MISS ? undefined : v
  }

  /** get() of a closed cache (it throws) or of one joined to the cluster tier (a promise). */
  #getAside(key) {
    const v = this.#get(key, 'get')
    return v === MISS ? this.#tier.miss(key, 'get') : Promise.resolve(v)
  }

  #get(key, method) {
    this.#open(method)
    if (typeof key === 'string' && this.#l1.max !== 0) {
      const v = this.#l1.get(this.#l1.strings, key, MISS)
      if (v !== MISS) return v
    }
    return this.#store.read(key, method)
  }

  /**
   * Whether `key` holds a value (a cached miss does not count).
   *
   * @example
   * cache.has('post:1') // true
   */
  has(key) {
    return this.#get(key, 'has') !== MISS
  }

  /**
   * Stores `value` under `key` for `ttl` (default: the cache's), with `tags`.
   * Once it returns, no process of the host returns the previous value.
   *
   * @example
   * cache.set('post:1', { title: 'Hello' }, { ttl: '10m', tags: ['posts'] })
   */
  set(key, value, options) {
    const M = 'Cache.set()'
    const { k, ttl, tags, enc } = this.#written('set', key, value, options)
    return this.#writer.set(k, stored(enc, value), ttl, tags, enc, M)
  }

  /**
   * Stores `value` only if `key` holds no fresh value; whether it did. Of
   * several processes adding one key at once, exactly one gets true.
   *
   * @example
   * cache.add('job:7', process.pid, { ttl: 30 }) // true for one worker
   */
  add(key, value, options) {
    const M = 'Cache.add()'
    const { k, ttl, tags, enc } = this.#written('add', key, value, options)
    return this.#writer.add(k, stored(enc, value), ttl, tags, enc, M)
  }

  /** For ziggurat/http and ziggurat/next: whether the cache is joined to the cluster tier. */
  get [JOINED]() {
    return this.#tier !== null
  }

  /** For ziggurat/http: the snapshot a guarded write of `key` compares against, or null. */
  [SEEN](key) {
    this.#open('set')
    return this.#store.seen(key)
  }

  /** For ziggurat/http: `set` only while nothing voided `seen` (from `[SEEN](of)`); whether it stored. */
  [FILL](key, value, ttl, tags, seen, of) {
    const M = 'Cache.set()'
    this.#open('set')
    return this.#store.fill(key, ttl, tags, encode(value, M, this.#serializer), seen, of, M)
  }

  /** What set() and add() write, checked: the key, ttl, tags and the encoded value. */
  #written(method, key, value, options) {
    const M = `Cache.${method}()`
    this.#open(method)
    const k = args.key(key, M)
    const o = args.options(options, M, SET_OPTIONS)
    const ttl = args.optionalDuration(o.ttl, M, 'ttl')
    const tags = args.tags(o.tags, M)
    return { k, ttl, tags, enc: encode(value, M, this.#serializer) }
  }

  /**
   * Adds `delta` (default 1) to the integer under `key`, atomically for every
   * process of the host, and returns the result (a BigInt beyond 2^53). A
   * missing key starts from `default` (0).
   *
   * @example
   * cache.incr('visits') // 1, then 2, ...
   */
  incr(key, delta = 1, options) {
    return this.#count('incr', key, delta, false, options)
  }

  /** incr() and decr(): `delta` added, or taken off when `negate`. */
  #count(method, key, delta, negate, options) {
    const M = `Cache.${method}()`
    this.#open(method)
    const k = args.key(key, M)
    let d = int64(delta, M, 'delta')
    if (negate) {
      if (d === -(2n ** 63n)) throw new RangeError(`${M}: delta must be > -2^63 (its negation must fit in 64 bits)`)
      d = -d
    }
    const o = args.options(options, M, INCR_OPTIONS)
    const start = o.default === undefined ? 0n : int64(o.default, M, 'default')
    const tags = args.tags(o.tags, M)
    return this.#writer.incr(k, d, start, tags, key, M)
  }

  /**
   * Gives the value under `key` a new TTL from now (default: the cache's);
   * whether the key held a fresh value.
   *
   * @example
   * cache.touch('post:2', { ttl: Infinity })
   */
  touch(key, options) {
    const M = 'Cache.touch()'
    this.#open('touch')
    const k = args.key(key, M)
    const o = args.options(options, M, TOUCH_OPTIONS)
    const ttl = args.optionalDuration(o.ttl, M, 'ttl')
    return this.#writer.touch(k, ttl, M)
  }

  /**
   * Removes `key`'s value for every process; whether there was one.
   *
   * @example
   * cache.delete('post:1')
   */
  delete(key) {
    const M = 'Cache.delete()'
    this.#open('delete')
    return this.#writer.delete(args.key(key, M), M)
  }

  /**
   * Voids every entry carrying any of `tags`, in every process of the host.
   *
   * @example
   * cache.invalidateTags('posts')
   */
  invalidateTags(...tags) {
    const M = 'Cache.invalidateTags()'
    this.#open('invalidateTags')
    const list = tags.length === 1 && Array.isArray(tags[0]) ? tags[0] : tags
    if (list.length === 0) throw new TypeError(`${M}: give at least one tag`)
    // Any number of tags may be invalidated at once (the limit of MAX_TAGS is per entry).
    for (let i = 0; i < list.length; i += MAX_TAGS) args.tags(list.slice(i, i + MAX_TAGS), M)
    return this.#writer.invalidateTags(list, M)
  }

  /**
   * Empties the cache for every process of the host.
   *
   * @example
   * cache.clear()
   */
  clear() {
    const M = 'Cache.clear()'
    this.#open('clear')
    if (this.#tier !== null) return this.#tier.clear(M)
    this.#l1.clear()
    this.#store.clear(M)
  }

  /**
   * The value of `key`, calling `loader({ signal })` on a miss: one loader
   * per key per host, whatever the language of the callers; concurrent calls
   * of one key in this process share one promise. A loader result of
   * `undefined` or `null` is cached as a miss for `negTtl` and resolves to
   * `undefined`. The signal aborts at `loaderTimeout`.
   *
   * @example
   * const post = await cache.getOrSet('post:2', async ({ signal }) => db.post(2, { signal }), { ttl: '10m' })
   */
  async getOrSet(key, loader, options) {
    const M = 'Cache.getOrSet()'
    this.#open('getOrSet')
    if (typeof loader !== 'function') {
      throw new TypeError(`${M}: loader must be a function, not ${args.typeName(loader)}`)
    }
    if (typeof key === 'string') {
      const v = this.#l1.get(this.#l1.strings, key, MISS)
      if (v !== MISS) {
        // With refreshAhead, a hit late in its value's life starts a refresh (lib/load.cjs).
        if (this.#refreshAhead !== 0) this.#store.refreshHit(key, loader, options, this.#l1.strings.get(key))
        return v
      }
    }
    return this.#store.load(args.key(key, M), loader, this.#plan(options))
  }

  /** getOrSet's options, checked: what its load (or early refresh) stores with. */
  #plan(options) {
    const M = 'Cache.getOrSet()'
    const o = args.options(options, M, GET_OR_SET_OPTIONS)
    return {
      ttl: args.optionalDuration(o.ttl, M, 'ttl'),
      negTtl: args.nullableDuration(o.negTtl, M, 'negTtl'),
      staleTtl: args.nullableDuration(o.staleTtl, M, 'staleTtl'),
      tags: args.tags(o.tags, M),
    }
  }

  // -- Many keys at once, decr, memoize (Python's get_many, set_many,
  // delete_many, decr and cached) ------------------------------------------

  /**
   * The values of `keys` that are present, as a Map from each key (as given)
   * to its value; absent keys are left out. Every key is checked before any
   * is read. Synchronous.
   *
   * @example
   * cache.getMany(['post:1', 'post:2']) // Map(1) { 'post:1' => { title: 'Hello' } }
   */
  getMany(keys) {
    this.#open('getMany')
    return this.#many.getMany(keys)
  }

  /**
   * Stores every [key, value] of `entries` (a Map, a plain object, or an
   * iterable of pairs) for `ttl` with `tags`, as set() each. Every key and
   * value is checked and encoded before the first is written: bad input
   * anywhere writes nothing.
   *
   * @example
   * cache.setMany({ 'post:1': { title: 'Hello' }, 'post:2': { title: 'Again' } }, { ttl: '10m' })
   */
  setMany(entries, options) {
    this.#open('setMany')
    return this.#many.setMany(entries, options)
  }

  /**
   * Removes every key of `keys` for every process; how many held a value.
   * Every key is checked before any is removed.
   *
   * @example
   * cache.deleteMany(['post:1', 'post:2', 'post:3']) // 2
   */
  deleteMany(keys) {
    this.#open('deleteMany')
    return this.#many.deleteMany(keys)
  }

  /**
   * Takes `delta` (default 1) off the integer under `key`, atomically for
   * every process of the host: incr() with `-delta`. Returns the result.
   *
   * @example
   * cache.set('stock', 5); cache.decr('stock', 2) // 3
   */
  decr(key, delta = 1, options) {
    return this.#count('decr', key, delta, true, options)
  }

  /**
   * `fn` with its results cached (Python's `Cache.cached`): an async
   * function whose calls go through getOrSet with a key made of `name`
   * (default `fn.name`) and the arguments as canonical JSON, digested; or
   * `name:` and what `options.key(...args)` returns. The result has
   * `.key(...args)` and `.invalidate(...args)`.
   *
   * @example
   * const user = cache.memoize(async (id) => db.user(id), { name: 'user', ttl: '10m', tags: (id) => [`user:${id}`] })
   * await user(5); user.invalidate(5)
   */
  memoize(fn, options) {
    this.#open('memoize')
    return memoize(this, fn, options, 'Cache.memoize()')
  }

  /**
   * A view whose keys are prefixed with `prefix + ':'` and which can be
   * cleared alone (the same keys and hidden tag as Python's namespaces).
   *
   * @example
   * const posts = cache.namespace('posts'); posts.set('1', 'hi'); cache.get('posts:1') // 'hi'
   */
  namespace(prefix) {
    this.#open('namespace')
    if (typeof prefix !== 'string') {
      throw new TypeError(`Cache.namespace(): prefix must be a string, not ${args.typeName(prefix)}`)
    }
    let parts
    try {
      parts = native.namespaceParts(prefix)
    } catch (e) {
      // The rule names Python's argument; this API's is `prefix`.
      throw translate(e, 'Cache.namespace()')
    }
    return new Namespace(this, prefix, parts)
  }

  /**
   * This process's counters of the cache and the host segment's figures.
   *
   * @example
   * cache.stats().l1.hits
   */
  stats() {
    this.#open('stats')
    const s = this.#store.stats(this.name, this.#mode)
    if (this.#tier !== null) s.l3 = this.#tier.stats()
    return s
  }
  /**
   * Detaches this process; the data stays for the others. Every later call throws.
   *
   * @example
   * cache.close()
   */
  close() {
    if (this.#closed) return
    this.#closed = true
    this.#aside = true
    this.#l1.clear()
    this.#tier?.close()
    this.#store.close()
    this.#native.close()
  }

  /**
   * close(), for `using`: the cache is closed as its block ends.
   *
   * @example
   * { using cache = new Cache('jobs'); cache.set('a', 1) } // closed here
   */
  [Symbol.dispose]() {
    this.close()
  }

  /**
   * Removes the cache's files (the processes attached keep using theirs until they close).
   *
   * @example
   * cache.unlink()
   */
  unlink() {
    this.#open('unlink')
    this.#store.unlink('Cache.unlink()')
  }
}

module.exports = { Cache, Namespace, ZigguratError, LoadTimeoutError, SegmentError }
module.exports.default = module.exports
