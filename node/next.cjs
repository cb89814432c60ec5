'use strict'
// ziggurat/next: Next.js's cache on a ziggurat Cache, shared by every Next.js
// instance of the host. `withZiggurat(nextConfig, options)` is the one entry in
// next.config: it sets Next.js's `cacheHandler` (ISR pages, route handlers and
// the fetch cache; Next.js 14.1 and later) and `cacheHandlers.default` ('use
// cache'; Next.js 16) to this package's handlers, which open the cache named in
// `options`. Tags live in the same cache (lib/next/manifest.cjs): a
// revalidateTag() or revalidatePath() through any instance is seen by every
// other at its next lookup, before the call returns.

const fs = require('node:fs')
const path = require('node:path')
const v8 = require('node:v8')
const { Cache } = require('./cache.cjs')
const { JOINED } = require('./lib/symbols.cjs')
const { Manifest } = require('./lib/next/manifest.cjs')

const ENV = 'ZIGGURAT_NEXT'
// Next.js names an ISR response's tags in this header when its context has none.
const TAGS_HEADER = 'x-next-cache-tags'
// Entries without an expiry Next.js gives are kept a year at most (the cache
// evicts before that under memory pressure).
const YEAR = 365 * 24 * 3600
// How long a render of a key by another instance is waited for before this one
// renders too; the lock outlives a dead renderer that long at most.
const RENDER_WAIT = 10

let shared = null

/** The cache of this process, opened once from the options withZiggurat() put in the environment. */
function open() {
  if (shared !== null) return shared
  let o = {}
  try {
    o = JSON.parse(process.env[ENV] ?? '{}')
  } catch {
    o = {}
  }
  const { name = 'next', ...options } = o
  const warn = (w) => process.emitWarning(w.message ?? String(w), 'ZigguratWarning')
  try {
    const cache = new Cache(name, { size: '256MiB', onWarning: warn, ...options })
    if (cache[JOINED]) {
      cache.close()
      throw new Error('ziggurat/next does not use the cluster tier (redis) yet: give withZiggurat() no redis')
    }
    shared = { cache, manifest: new Manifest(cache), warned: new Set(), decoded: new WeakMap() }
  } catch (e) {
    // Options the cache refuses never fail a request: every lookup misses, and this says why.
    process.emitWarning(`ziggurat/next: the cache ${JSON.stringify(name)} could not open (${e.message}); Next.js runs without a cache`, 'ZigguratWarning')
    const none = { get: () => undefined, set() {}, add: () => true, delete: () => false }
    shared = { cache: none, manifest: new Manifest(none), warned: new Set(), decoded: new WeakMap() }
  }
  return shared
}

/**
 * The entry stored under `key`, or null. The L1 hands out one Buffer per stored
 * value until a write in any instance replaces it, so each Buffer is decoded
 * once per process, as Next.js's own in-memory cache hands out one object.
 */
function decoded(s, key) {
  const raw = s.cache.get(key)
  if (!Buffer.isBuffer(raw)) return null
  let entry = s.decoded.get(raw)
  if (entry === undefined) {
    try {
      entry = v8.deserialize(raw)
    } catch {
      entry = null
    }
    s.decoded.set(raw, entry)
  }
  return entry
}

/** Warns once per kind: a cache that fails never fails a request. */
function warnOnce(s, what, e) {
  if (s.warned.has(what)) return
  s.warned.add(what)
  process.emitWarning(`ziggurat/next: ${what}: ${e?.message ?? e}`, 'ZigguratWarning')
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Next.js's `cacheHandler` (ISR pages, route handlers, the fetch cache). Every
 * instance of the host reads what any stored; when instances miss a key
 * together, one renders it and the others wait for its result (at most 10 s).
 *
 * @example
 * // next.config.mjs: export default withZiggurat({}, { name: 'site', size: '512MiB' })
 */
class ZigguratCacheHandler {
  constructor(ctx = {}) {
    this.s = open()
    this.dev = Boolean(ctx.dev)
  }

  static key(cacheKey) {
    return `next:r:${cacheKey}`
  }

  /** The stored entry of `cacheKey` as Next.js takes it, or null (a miss: render). */
  async get(cacheKey, ctx = {}) {
    const s = this.s
    const key = ZigguratCacheHandler.key(cacheKey)
    const soft = ctx.kind === 'FETCH' || ctx.fetchCache ? (ctx.softTags ?? []) : []
    try {
      let entry = this.#usable(key, soft)
      if (entry !== null) return entry
      // A miss. The instance that takes the key's render lock renders it; the others
      // wait for its result, and render themselves only if none comes.
      const lock = `${key}\u0000render`
      if (s.cache.add(lock, process.pid, { ttl: RENDER_WAIT })) return null
      const until = Date.now() + RENDER_WAIT * 1000
      while (Date.now() < until) {
        await sleep(20)
        // The lock is read before the entry: a renderer stores the entry, then drops
        // the lock, so a lock seen gone means its entry, if any, is there to read.
        const held = s.cache.get(lock) !== undefined
        entry = this.#usable(key, soft)
        if (entry !== null) return entry
        if (!held) return null
      }
      return null
    } catch (e) {
      warnOnce(s, 'a lookup failed', e)
      return null
    }
  }

  /** The entry under `key` unless a revalidation of its tags (or `soft`) expired it. */
  #usable(key, soft) {
    const entry = decoded(this.s, key)
    if (entry === null) return null
    const state = this.s.manifest.state([...entry.tags, ...soft], entry.lastModified)
    if (state === 'expired') {
      this.s.cache.delete(key)
      return null
    }
    // A stale entry is served while Next.js makes it anew in the background, by one
    // instance of the host: the one that takes the key's refresh lock. The others serve
    // it as it is until the new one lands (or the lock lapses with a renderer that died).
    const refresh = state === 'stale' && this.s.cache.add(`${key}\u0000refresh`, process.pid, { ttl: RENDER_WAIT })
    return { lastModified: refresh ? -1 : entry.lastModified, value: entry.value }
  }

  /** Stores `data` for `cacheKey` (null: removes it), with its tags. */
  async set(cacheKey, data, ctx = {}) {
    const s = this.s
    const key = ZigguratCacheHandler.key(cacheKey)
    try {
      if (data === null || data === undefined) {
        s.cache.delete(key)
        return
      }
      let tags = Array.isArray(ctx.tags) ? ctx.tags : []
      const header = data.headers?.[TAGS_HEADER]
      if (tags.length === 0 && typeof header === 'string') tags = header.split(',').filter(Boolean)
      const expire = ctx.cacheControl?.expire
      const ttl = typeof expire === 'number' && expire > 0 && expire < YEAR ? expire : YEAR
      const entry = { lastModified: Date.now(), value: data, tags }
      s.cache.set(key, v8.serialize(entry), { ttl })
    } catch (e) {
      warnOnce(s, 'an entry was not stored (larger than the segment takes, or the cache failed)', e)
    } finally {
      try {
        s.cache.delete(`${key}\u0000render`)
        s.cache.delete(`${key}\u0000refresh`)
      } catch {}
    }
  }

  /** Revalidates `tags` in every instance of the host (Next.js 16: `durations`, its profiles). */
  async revalidateTag(tags, durations) {
    try {
      this.s.manifest.update(tags, durations)
    } catch (e) {
      warnOnce(this.s, 'a revalidation failed', e)
      throw e
    }
  }

  resetRequestCache() {}
}

/** Bytes of a web stream. */
async function bytesOf(stream) {
  const chunks = []
  for await (const c of stream) chunks.push(Buffer.from(c))
  return Buffer.concat(chunks)
}

/** A new web stream of `bytes`. */
function streamOf(bytes) {
  return new ReadableStream({
    start(c) {
      c.enqueue(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength))
      c.close()
    },
  })
}

/**
 * Next.js 16's `cacheHandlers` entry for 'use cache': entries and tags in the
 * host's cache. A get() of a key another instance is setting waits for it.
 *
 * @example
 * // next.config.mjs: withZiggurat sets cacheHandlers.default to this handler
 */
function createUseCacheHandler() {
  const s = open()
  const pending = new Map()
  const key = (k) => `next:u:${k}`
  const read = (k) => decoded(s, key(k))
  return {
    async get(cacheKey, softTags = []) {
      try {
        const mine = pending.get(cacheKey)
        if (mine) await mine
        let e = read(cacheKey)
        if (e === null && s.cache.get(`${key(cacheKey)}\u0000set`) !== undefined) {
          const until = Date.now() + RENDER_WAIT * 1000
          // The marker is read before the entry: a setter stores the entry, then drops
          // the marker, so a marker seen gone means its entry, if any, is there to read.
          for (let held = true; e === null && held && Date.now() < until; ) {
            await sleep(20)
            held = s.cache.get(`${key(cacheKey)}\u0000set`) !== undefined
            e = read(cacheKey)
          }
        }
        if (e === null) return undefined
        const { bytes, ...meta } = e
        if (Date.now() > meta.timestamp + meta.revalidate * 1000) return undefined
        const state = s.manifest.state([...meta.tags, ...softTags], meta.timestamp)
        if (state === 'expired') return undefined
        return { ...meta, revalidate: state === 'stale' ? -1 : meta.revalidate, value: streamOf(bytes) }
      } catch (e) {
        warnOnce(s, 'a lookup failed', e)
        return undefined
      }
    },
    async set(cacheKey, pendingEntry) {
      let done
      pending.set(cacheKey, new Promise((r) => (done = r)))
      const marker = `${key(cacheKey)}\u0000set`
      try {
        s.cache.set(marker, process.pid, { ttl: RENDER_WAIT })
        const entry = await pendingEntry
        if (entry.expire === 0) return // dynamic: never read back
        const bytes = await bytesOf(entry.value)
        const { value: _, ...meta } = entry
        const ttl = entry.expire > 0 && entry.expire < YEAR ? entry.expire : YEAR
        s.cache.set(key(cacheKey), v8.serialize({ ...meta, bytes }), { ttl })
      } catch (e) {
        warnOnce(s, 'an entry was not stored', e)
      } finally {
        try {
          s.cache.delete(marker)
        } catch {}
        pending.delete(cacheKey)
        done()
      }
    },
    // The tags live in the host's cache, read at each lookup: nothing to refresh.
    async refreshTags() {},
    async getExpiration(tags) {
      try {
        return s.manifest.expiration(tags)
      } catch {
        return 0
      }
    },
    async updateTags(tags, durations) {
      s.manifest.update(tags, durations)
    },
  }
}

/**
 * The path of this package's `file` as the app's node_modules holds it: Next.js's
 * bundler takes handler modules from inside the app's directory only, and a
 * linked package (npm link, file:) resolves to its real place outside it.
 */
function inApp(file) {
  const local = path.join(process.cwd(), 'node_modules', 'ziggurat', file)
  return fs.existsSync(local) ? local : require.resolve(`./${file}`)
}

/**
 * `nextConfig` with Next.js's caches on the ziggurat cache `options.name`
 * (with the other `options` of `new Cache`), shared by every instance of the
 * host. Next.js's own in-memory cache is turned off (`cacheMaxMemorySize: 0`):
 * every instance reads the shared one.
 *
 * @example
 * // next.config.mjs
 * import { withZiggurat } from 'ziggurat/next'
 * export default withZiggurat({ reactStrictMode: true }, { name: 'site', size: '512MiB' })
 */
function withZiggurat(nextConfig = {}, options = {}) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('withZiggurat(): options must be an object such as { name: "site", size: "512MiB" }')
  }
  if (options.name !== undefined && typeof options.name !== 'string') {
    throw new TypeError('withZiggurat(): options.name must be a string (the cache\'s name)')
  }
  process.env[ENV] = JSON.stringify(options)
  return {
    ...nextConfig,
    cacheHandler: inApp('next-handler.cjs'),
    cacheHandlers: { ...(nextConfig.cacheHandlers ?? {}), default: inApp('next-use-cache.cjs') },
    cacheMaxMemorySize: 0,
  }
}

module.exports = { withZiggurat, ZigguratCacheHandler, createUseCacheHandler }
