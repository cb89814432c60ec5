'use strict'
// The ziggurat Cache for Node.js: a per-process L1 of live objects over the
// host's shared-memory segment, which every worker process of the host (of
// Node.js or Python) attaches to by name. See docs/node.md.

const { performance } = require('node:perf_hooks')
const native = require('./lib/native.cjs')
const args = require('./lib/args.cjs')
const { encode, decode } = require('./lib/values.cjs')
const { L1, meta } = require('./lib/l1.cjs')
const { ZigguratError, LoadTimeoutError, translate } = require('./lib/errors.cjs')
const { Degraded, SegmentError, MODES, refusal, notice } = require('./lib/degraded.cjs')

const MISS = Symbol('miss')

// This thread's input block (see crates/ziggurat-node/src/words.rs): a read
// of a string key puts the cache's slot, the key's length and its UTF-8 there
// and calls readInput() without arguments, the cheapest call into the addon.
const inputBuffer = native.NativeCache.input()
const inputWords = inputBuffer ? new Uint32Array(inputBuffer, 0, 2) : null
const inputKey = inputBuffer ? Buffer.from(inputBuffer, 8, 4096) : null
// Keys of up to this many UTF-16 units fit the block's 4096 bytes of UTF-8.
const INPUT_CHARS = 1365

/**
 * Puts a short key's UTF-8 in the input block; its length in bytes. An ASCII
 * key is copied here, cheaper than Buffer's write (a call into C++) for the
 * short keys most reads have.
 */
function putShort(key) {
  const n = key.length
  for (let i = 0; i < n; i++) {
    const c = key.charCodeAt(i)
    if (c > 0x7f) return inputKey.write(key)
    inputKey[i] = c
  }
  return n
}
const STEP_VALUE = 0
const STEP_NEGATIVE = 1
const STEP_LOAD = 2
const STEP_WAIT = 3

const CACHE_OPTIONS = [
  'size',
  'negSize',
  'l1Items',
  'ttl',
  'negTtl',
  'staleTtl',
  'jitter',
  'loaderTimeout',
  'directory',
  'avgItemSize',
  'lockTimeout',
  'hugePages',
  'copy',
  'debug',
  'degraded',
  'degradedTtl',
]
const SET_OPTIONS = ['ttl', 'tags']
const GET_OR_SET_OPTIONS = ['ttl', 'tags', 'negTtl', 'staleTtl']
const INCR_OPTIONS = ['default', 'tags']
const TOUCH_OPTIONS = ['ttl']

const NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,79}$/

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
  #slot
  #l1
  #closed = false
  #flights = new Map()
  #loaderTimeout
  #warned = new Set()
  #decodeErrors = 0
  #ttl
  /** @type {Degraded | null} the store while the segment cannot be used */
  #dg = null
  #failure = null
  #mode
  #loads = 0
  #loadErrors = 0

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
    if (!NAME.test(name)) {
      throw new RangeError(
        `${M}: name must be 1-80 characters of A-Z a-z 0-9 . _ - not starting with '.', got ${JSON.stringify(name)}`,
      )
    }
    const o = args.options(options, M, CACHE_OPTIONS)
    const l1Items = o.l1Items === undefined ? 10_000 : args.integer(o.l1Items, M, 'l1Items', 0, 2 ** 31)
    const ttl = o.ttl === undefined ? 300 : args.duration(o.ttl, M, 'ttl')
    const negTtl = o.negTtl === undefined ? 30 : args.nullableDuration(o.negTtl, M, 'negTtl')
    const staleTtl = args.nullableDuration(o.staleTtl, M, 'staleTtl') ?? null
    const jitter = o.jitter === undefined ? 0.1 : args.fraction(o.jitter, M, 'jitter')
    const loaderTimeout =
      o.loaderTimeout === undefined ? 10 : args.duration(o.loaderTimeout, M, 'loaderTimeout')
    const size = args.size(o.size, M, 'size')
    const negSize = args.size(o.negSize, M, 'negSize')
    const directory = o.directory === undefined ? '/dev/shm' : args.string(o.directory, M, 'directory')
    const avgItemSize =
      o.avgItemSize === undefined ? 256 : args.integer(o.avgItemSize, M, 'avgItemSize', 32, 16_777_216)
    if (o.lockTimeout !== undefined && typeof o.lockTimeout !== 'number') {
      throw new TypeError(`${M}: lockTimeout must be a number of seconds, not ${args.typeName(o.lockTimeout)}`)
    }
    const hugePages = o.hugePages === undefined ? 'auto' : args.string(o.hugePages, M, 'hugePages')
    const copy = o.copy === undefined ? 'shared' : args.string(o.copy, M, 'copy')
    if (copy !== 'shared' && copy !== 'copy') {
      throw new RangeError(`${M}: copy must be 'shared' or 'copy', got ${JSON.stringify(copy)}`)
    }
    if (o.debug !== undefined && typeof o.debug !== 'boolean') {
      throw new TypeError(`${M}: debug must be true or false, not ${args.typeName(o.debug)}`)
    }
    const mode = o.degraded === undefined ? 'passthrough' : args.string(o.degraded, M, 'degraded')
    if (!MODES.includes(mode)) {
      throw new RangeError(`${M}: degraded must be 'passthrough', 'local' or 'raise', got ${JSON.stringify(mode)}`)
    }
    const degradedTtl = o.degradedTtl === undefined ? 1 : args.duration(o.degradedTtl, M, 'degradedTtl')
    try {
      this.#native = new native.NativeCache(name, {
        size,
        negSize,
        directory,
        avgItemSize,
        lockTimeout: o.lockTimeout,
        hugePages,
        ttl,
        negTtl: negTtl ?? undefined,
        staleTtl: staleTtl ?? undefined,
        jitter,
        loaderTimeout,
        l1: l1Items > 0,
      })
    } catch (e) {
      throw translate(e, M)
    }
    this.#mode = mode
    this.#ttl = ttl
    const failure = this.#native.failure
    if (failure) {
      if (mode === 'raise') throw refusal(name, failure)
      // A process stays degraded until it opens the cache again (in practice, restarts).
      this.#failure = failure
      this.#dg = new Degraded(mode, degradedTtl, l1Items, { copy: copy === 'copy', debug: o.debug === true })
      process.emitWarning(notice(name, failure, mode, degradedTtl), 'ZigguratWarning')
    }
    // A degraded cache never reads the segment: it has no reader slot.
    this.#slot = failure ? -1 : this.#native.reader()
    if (this.#native.notice) process.emitWarning(this.#native.notice, 'ZigguratWarning')
    const words = l1Items > 0 && !failure ? this.#native.words() : null
    this.#l1 = new L1(
      words ? l1Items : 0,
      words ?? [new ArrayBuffer(4), new ArrayBuffer(4), new ArrayBuffer(8)],
      copy,
      o.debug === true,
    )
    this.#loaderTimeout = loaderTimeout
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
    return this.#dg !== null
  }

  /**
   * Why the segment cannot be used (naming the file and the remedy), or null.
   *
   * @example
   * cache.degradedReason // 'directory /missing does not exist: ...' or null
   */
  get degradedReason() {
    return this.#failure?.reason ?? null
  }

  /**
   * The same as a short stable name (missing_directory, not_writable, other_owner,
   * no_space, damaged, incompatible, locked, no_huge_pages, io), or null.
   *
   * @example
   * cache.degradedCause // 'missing_directory' or null
   */
  get degradedCause() {
    return this.#failure?.cause ?? null
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
    // The L1 hit is the common case: checked here, with no call but the L1's.
    if (this.#closed) this.#open('get')
    if (typeof key === 'string') {
      const v = this.#l1.get(this.#l1.strings, key, MISS)
      if (v !== MISS) return v
    }
    const v = this.#below(key, 'get')
    return v === MISS ? undefined : v
  }

  #get(key, method) {
    this.#open(method)
    if (typeof key === 'string') {
      const v = this.#l1.get(this.#l1.strings, key, MISS)
      if (v !== MISS) return v
    }
    return this.#below(key, method)
  }

  /** A read that L1 did not answer for a string key (or any read of a Buffer key). */
  #below(key, method) {
    if (this.#dg !== null) {
      const k = args.key(key, `Cache.${method}()`)
      return this.#dg.get(this.#dgKey(k, `Cache.${method}()`), MISS)
    }
    let out
    if (typeof key === 'string') {
      // The common read, kept lean: args.key() only for the error of a lone
      // surrogate.
      if (!key.isWellFormed()) args.key(key, `Cache.${method}()`)
      try {
        if (inputWords !== null && key.length <= INPUT_CHARS) {
          inputWords[0] = this.#slot
          inputWords[1] = key.length <= 32 ? putShort(key) : inputKey.write(key)
          out = native.readInput()
        } else {
          out = this.#native.read(key)
        }
      } catch (e) {
        throw translate(e, `Cache.${method}()`)
      }
      return this.#take(key, out)
    }
    const k = args.key(key, `Cache.${method}()`)
    const v = this.#l1.get(this.#l1.buffers, k.toString('latin1'), MISS)
    if (v !== MISS) return v
    try {
      out = this.#native.read(k)
    } catch (e) {
      throw translate(e, `Cache.${method}()`)
    }
    return this.#take(k, out)
  }

  /** The value the addon returned (kept in L1 when the meta words allow), or MISS. */
  #take(key, out) {
    const code = meta[0]
    if (code === 0 || code === 4) return MISS
    const v = decode(out, code)
    if (v === undefined) {
      this.#decodeErrors++
      return MISS
    }
    this.#l1.keep(key, v)
    return v
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
    this.#open('set')
    const k = args.key(key, M)
    const o = args.options(options, M, SET_OPTIONS)
    const ttl = args.optionalDuration(o.ttl, M, 'ttl')
    const tags = args.tags(o.tags, M)
    const [code, text, bytes, num, big] = encode(value, M)
    if (this.#dg !== null) {
      this.#dg.set(this.#dgKey(k, M), value, ttl ?? this.#ttl, tags)
      return
    }
    try {
      this.#native.store(k, code, text, bytes, num, big, ttl, tags)
    } catch (e) {
      this.#l1.drop(k)
      throw translate(e, M)
    }
    this.#l1.keep(k, value)
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
    this.#open('add')
    const k = args.key(key, M)
    const o = args.options(options, M, SET_OPTIONS)
    const ttl = args.optionalDuration(o.ttl, M, 'ttl')
    const tags = args.tags(o.tags, M)
    const [code, text, bytes, num, big] = encode(value, M)
    if (this.#dg !== null) {
      // Atomic within this process only; passthrough keeps nothing, so every add stores.
      const mk = this.#dgKey(k, M)
      if (this.#dg.get(mk, MISS) !== MISS) return false
      this.#dg.set(mk, value, ttl ?? this.#ttl, tags)
      return true
    }
    try {
      return this.#native.add(k, code, text, bytes, num, big, ttl, tags)
    } catch (e) {
      throw translate(e, M)
    } finally {
      this.#l1.drop(k)
    }
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
    const M = 'Cache.incr()'
    this.#open('incr')
    const k = args.key(key, M)
    const d = int64(delta, M, 'delta')
    const o = args.options(options, M, INCR_OPTIONS)
    const start = o.default === undefined ? 0n : int64(o.default, M, 'default')
    const tags = args.tags(o.tags, M)
    if (this.#dg !== null) return this.#degradedIncr(this.#dgKey(k, M), d, start, tags, key)
    this.#l1.drop(k)
    try {
      return this.#native.incr(k, d, start, tags)
    } catch (e) {
      throw translate(e, M)
    }
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
    if (this.#dg !== null) {
      const mk = this.#dgKey(k, M)
      const cur = this.#dg.get(mk, MISS)
      if (cur === MISS) return false
      this.#dg.set(mk, cur, ttl ?? this.#ttl, this.#dg.entries.get(mk)?.tags)
      return true
    }
    this.#l1.drop(k)
    try {
      return this.#native.touch(k, ttl)
    } catch (e) {
      throw translate(e, M)
    }
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
    const k = args.key(key, M)
    if (this.#dg !== null) return this.#dg.delete(this.#dgKey(k, M))
    this.#l1.drop(k)
    try {
      return this.#native.delete(k)
    } catch (e) {
      throw translate(e, M)
    }
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
    // Any number of tags may be invalidated at once (the limit of 8 is per entry).
    for (let i = 0; i < list.length; i += 8) args.tags(list.slice(i, i + 8), M)
    if (this.#dg !== null) return this.#dg.invalidateTags(list)
    try {
      this.#native.invalidateTags(list)
    } catch (e) {
      throw translate(e, M)
    }
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
    this.#l1.clear()
    if (this.#dg !== null) return this.#dg.clear()
    try {
      this.#native.clear()
    } catch (e) {
      throw translate(e, M)
    }
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
      if (v !== MISS) return v
    }
    const k = args.key(key, M)
    const o = args.options(options, M, GET_OR_SET_OPTIONS)
    const plan = {
      ttl: args.optionalDuration(o.ttl, M, 'ttl'),
      negTtl: args.nullableDuration(o.negTtl, M, 'negTtl'),
      staleTtl: args.nullableDuration(o.staleTtl, M, 'staleTtl'),
      tags: args.tags(o.tags, M),
    }
    const fk = typeof k === 'string' ? `s${k}` : `b${k.toString('latin1')}`
    const shared = this.#flights.get(fk)
    if (shared !== undefined) return this.#l1.out(await shared)
    const p = this.#miss(k, loader, plan)
    this.#flights.set(fk, p)
    try {
      return await p
    } finally {
      this.#flights.delete(fk)
    }
  }

  async #miss(key, loader, plan) {
    const M = 'Cache.getOrSet()'
    if (this.#dg !== null) return this.#degradedLoad(key, loader, plan)
    let m
    try {
      m = this.#native.begin(key, plan.ttl, plan.negTtl ?? undefined, plan.staleTtl ?? undefined, plan.tags)
    } catch (e) {
      throw translate(e, M)
    }
    for (;;) {
      switch (m.step) {
        case STEP_VALUE: {
          const v = this.#take(key, m.got())
          if (v === MISS) return this.#load(key, loader, plan)
          return v
        }
        case STEP_NEGATIVE:
          return undefined
        case STEP_WAIT:
          try {
            m = await this.#native.wait(m)
            this.#open('getOrSet')
            this.#native.afterWait(m)
          } catch (e) {
            throw translate(e, M)
          }
          break
        case STEP_LOAD:
          return this.#run(m, key, loader)
        default:
          throw new ZigguratError(`${M}: unknown step ${m.step}`)
      }
    }
  }

  /**
   * getOrSet without a segment: this process's entry ('local'), else the loader, whose
   * result 'local' keeps (a loader's undefined or null is not cached, as in Python).
   */
  async #degradedLoad(key, loader, plan) {
    const mk = this.#dgKey(key, 'Cache.getOrSet()')
    const v = this.#dg.get(mk, MISS)
    if (v !== MISS) return v
    this.#loads++
    let value
    try {
      value = await loader({ signal: AbortSignal.timeout(this.#loaderTimeout * 1000) })
    } catch (e) {
      this.#loadErrors++
      throw e
    }
    if (value === undefined || value === null) return undefined
    if (this.#dg.local && !this.#closed) {
      try {
        encode(value, 'Cache.getOrSet()')
        this.#dg.set(mk, value, plan.ttl ?? this.#ttl, plan.tags)
      } catch (e) {
        this.#warn(key, e)
      }
    }
    return value
  }

  /** The map key of a degraded cache's `k`, checked as the segment would check it. */
  #dgKey(k, method) {
    try {
      native.NativeCache.checkKey(k)
    } catch (e) {
      throw translate(e, method)
    }
    return mapKey(k)
  }

  /** incr without a segment: atomic within this process, as in Python. */
  #degradedIncr(mk, delta, start, tags, key) {
    const M = 'Cache.incr()'
    const cur = this.#dg.get(mk, MISS)
    let n
    if (cur === MISS) {
      n = start + delta
    } else if (typeof cur === 'bigint' || Number.isSafeInteger(cur)) {
      n = BigInt(cur) + delta
    } else {
      throw new TypeError(`${M}: the value of ${JSON.stringify(String(key))} is not an integer`)
    }
    if (n < -(2n ** 63n) || n >= 2n ** 63n) {
      throw new RangeError(`${M}: the counter ${JSON.stringify(String(key))} would leave 64 bits`)
    }
    const out = n >= -(2n ** 53n) + 1n && n <= 2n ** 53n - 1n ? Number(n) : n
    this.#dg.set(mk, out, this.#ttl, cur === MISS ? tags : this.#dg.entries.get(mk)?.tags)
    return out
  }

  /** A value that landed but that this process cannot read: load without the lease. */
  async #load(key, loader, plan) {
    const value = await loader({ signal: AbortSignal.timeout(this.#loaderTimeout * 1000) })
    return value === null ? undefined : value
  }

  /** Runs the loader while this process holds the key's lease, then lands its result. */
  async #run(m, key, loader) {
    const M = 'Cache.getOrSet()'
    const ac = new AbortController()
    const timer = setTimeout(
      () => ac.abort(new LoadTimeoutError(`${M}: the loader did not finish within loaderTimeout (${this.#loaderTimeout} s)`)),
      Math.min(this.#loaderTimeout * 1000, 2 ** 31 - 1),
    )
    const t0 = performance.now()
    let value
    try {
      value = await loader({ signal: ac.signal })
    } catch (e) {
      clearTimeout(timer)
      const seconds = (performance.now() - t0) / 1000
      if (this.#closed) {
        m.giveBack()
      } else {
        const stale = this.#native.failed(m, seconds)
        const v = decode(stale, meta[0])
        if (v !== undefined) return v
      }
      throw e
    }
    clearTimeout(timer)
    const seconds = (performance.now() - t0) / 1000
    if (this.#closed) {
      // Closed while loading: nothing is stored, and the others need not wait for the lease.
      m.giveBack()
      return value ?? undefined
    }
    if (value === undefined || value === null) {
      try {
        this.#native.landNegative(m, seconds)
      } catch (e) {
        this.#warn(key, translate(e, M))
      }
      return undefined
    }
    let enc
    try {
      enc = encode(value, M)
    } catch (e) {
      m.giveBack()
      this.#warn(key, e)
      return value
    }
    try {
      this.#native.land(m, enc[0], enc[1], enc[2], enc[3], enc[4], seconds)
      this.#l1.keep(key, value)
    } catch (e) {
      this.#warn(key, translate(e, M))
    }
    return value
  }

  /** Says once per key that a loaded value could not be stored (it is still returned). */
  #warn(key, e) {
    const k = typeof key === 'string' ? key : key.toString('hex')
    if (this.#warned.has(k) || this.#warned.size > 1000) return
    this.#warned.add(k)
    process.emitWarning(`cache ${JSON.stringify(this.name)}: the value loaded for ${JSON.stringify(k)} was returned but not stored: ${e.message}`, 'ZigguratWarning')
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
    if (typeof prefix !== 'string' || prefix === '' || prefix.includes(':')) {
      throw new RangeError(
        `Cache.namespace(): prefix must be a non-empty string without ':', got ${JSON.stringify(prefix)}`,
      )
    }
    return new Namespace(this, prefix)
  }

  /**
   * This process's counters of the cache and the host segment's figures.
   *
   * @example
   * cache.stats().l1.hits
   */
  stats() {
    this.#open('stats')
    if (this.#dg !== null) return this.#degradedStats()
    const c = this.#native.counts()
    const host = {}
    for (const { name, value } of c.host) host[name] = value
    const negHost = {}
    for (const { name, value } of c.negHost) negHost[name] = value
    return {
      name: this.name,
      l1: { items: this.#l1.size, maxItems: this.#l1.max, hits: this.#l1.hits, misses: c.l1Misses },
      l2: { hits: c.l2Hits, misses: c.l2Misses },
      negHits: c.negHits,
      foreign: c.foreign,
      decodeErrors: this.#decodeErrors,
      loads: c.loads,
      loadErrors: c.loadErrors,
      waits: c.waits,
      takeovers: c.takeovers,
      staleServed: c.staleServed,
      degraded: null,
      degradedCause: null,
      degradedMode: this.#mode,
      host,
      negHost,
    }
  }

  #degradedStats() {
    const dg = this.#dg
    return {
      name: this.name,
      l1: { items: dg.size, maxItems: dg.local ? dg.max : 0, hits: dg.hits, misses: dg.misses },
      l2: { hits: 0, misses: 0 },
      negHits: 0,
      foreign: 0,
      decodeErrors: 0,
      loads: this.#loads,
      loadErrors: this.#loadErrors,
      waits: 0,
      takeovers: 0,
      staleServed: 0,
      degraded: this.#failure.reason,
      degradedCause: this.#failure.cause,
      degradedMode: this.#mode,
      host: {},
      negHost: {},
    }
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
    this.#l1.clear()
    this.#dg?.clear()
    if (this.#slot >= 0) native.forgetReader(this.#slot)
    this.#native.close()
  }

  /**
   * Removes the cache's files (the processes attached keep using theirs until they close).
   *
   * @example
   * cache.unlink()
   */
  unlink() {
    this.#open('unlink')
    if (this.#dg !== null) {
      throw new ZigguratError(
        `Cache.unlink(): cache ${JSON.stringify(this.name)} runs without its segment (${this.#failure.reason}); ` +
          'remove its files with `ziggurat rm` once the cause is fixed',
      )
    }
    try {
      this.#native.unlink()
    } catch (e) {
      throw translate(e, 'Cache.unlink()')
    }
  }
}

/** The key of a degraded cache's map: strings and bytes apart, as in L1. */
function mapKey(k) {
  return typeof k === 'string' ? `s${k}` : `b${k.toString('latin1')}`
}

/** A 64-bit integer argument as a BigInt. */
function int64(v, method, what) {
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`${method}: ${what} must be an integer, got ${v}`)
    return BigInt(v)
  }
  if (typeof v === 'bigint') {
    if (v < -(2n ** 63n) || v >= 2n ** 63n) {
      throw new RangeError(`${method}: ${what} must fit in a signed 64-bit integer`)
    }
    return v
  }
  throw new TypeError(`${method}: ${what} must be an integer (number or BigInt), not ${args.typeName(v)}`)
}

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

  constructor(cache, prefix) {
    this.#cache = cache
    this.#prefix = `${prefix}:`
    this.#tag = `\u0000ns:${prefix}`
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
    this.#cache.set(this.#k(key, 'set'), value, this.#o(options, 'set', SET_OPTIONS))
  }

  /** @example ns.add('1', 1) */
  add(key, value, options) {
    return this.#cache.add(this.#k(key, 'add'), value, this.#o(options, 'add', SET_OPTIONS))
  }

  /** @example ns.incr('hits') */
  incr(key, delta = 1, options) {
    return this.#cache.incr(this.#k(key, 'incr'), delta, this.#o(options, 'incr', INCR_OPTIONS))
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
      o = this.#o(options, 'getOrSet', GET_OR_SET_OPTIONS)
    } catch (e) {
      return Promise.reject(e)
    }
    return this.#cache.getOrSet(k, loader, o)
  }

  /** Voids every entry of the namespace, in every process. @example ns.clear() */
  clear() {
    this.#cache.invalidateTags(this.#tag)
  }
}

module.exports = { Cache, Namespace, ZigguratError, LoadTimeoutError, SegmentError }
module.exports.default = module.exports
