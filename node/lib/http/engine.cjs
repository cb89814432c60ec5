'use strict'
// The request flow of ziggurat/http, without I/O: every adapter drives this
// engine. A request is first tried as a plain hit (fresh(): a GET or HEAD
// with none of the fields that ask for more, and a fresh response stored for
// its URL); else decide() applies the full rules and answers with a hit, a
// reply, a pass (forward to the app, only strip this cache's own lines) or a
// Fill (fill.cjs). Both give the same answer.
//
// Each process decodes a stored response once: its Hit is kept by the
// identity of the value bytes the cache's L1 hands back, which stays the same
// until a write of the key in any process.

const native = require('../native.cjs')
const { rules } = require('./options.cjs')
const { Store } = require('./store.cjs')
const { Fill, reply } = require('./fill.cjs')
const { repeats } = require('./lines.cjs')

// The table of Hits is let go past this many entries: it keeps stored
// responses alive after the cache dropped them.
const HITS_MAX = 4096
const PREFIXES_MAX = 1024
const EMPTY = Buffer.alloc(0)

/** A stored response as this process sends it while fresh, for one second of its age. */
class Hit {
  constructor(value, h) {
    this.value = value
    this.status = h.status
    this.body = value.subarray(h.bodyStart, h.bodyEnd)
    this.set(h)
  }

  set(h) {
    this.headers = h.headers
    this.repeats = repeats(h.headers)
    this.since = h.since
    this.until = h.until
  }
}

class Engine {
  /**
   * @param cache a ziggurat Cache
   * @param o the checked settings (options.cjs)
   * @param warn (message, error) for what the cache survives
   */
  constructor(cache, o, warn) {
    this.cache = cache
    this.o = o
    this.rules = rules(o)
    this.store = new Store(cache)
    this.warn = warn
    this.blockers = new Set(this.rules.blockers())
    this.purgeClients = new Set(o.purgeClients)
    this.hits = new WeakMap()
    this.hitCount = 0
    /** Host header -> the key prefix of its URLs ('' when not allowed), per scheme. */
    this.prefixes = { http: new Map(), https: new Map() }
  }

  /**
   * The Hit for a plain request (GET or HEAD, `headers` the parsed object of
   * lower-case names), or null: decide() then applies the full rules.
   */
  fresh(scheme, host, target, headers, now) {
    try {
      for (const name in headers) {
        // A name with '_' bypasses the cache (the full rules say so).
        if (this.blockers.has(name) || name.includes('_')) return null
      }
      if (typeof host !== 'string' || target.charCodeAt(0) !== 47) return null
      const prefixes = this.prefixes[scheme]
      if (prefixes === undefined) return null
      let prefix = prefixes.get(host)
      if (prefix === undefined) {
        prefix = this.rules.prefix(scheme, host) ?? ''
        if (prefixes.size >= PREFIXES_MAX) prefixes.clear()
        prefixes.set(host, prefix)
      }
      if (prefix === '') return null
      if (target.includes('?') && native.httpOverridesMethod(target)) return null
      const key = prefix + target
      // A key of other characters than ASCII is a Buffer key: the full rules make it.
      for (let i = 0; i < target.length; i++) if (target.charCodeAt(i) > 0x7f) return null
      const v = this.store.get(key)
      if (v === null) return null
      return this.hit(v, now)
    } catch {
      return null // decide() meets the same fault, and reports it
    }
  }

  /** The value `v` (a response not varying) as a Hit ready at `now`, or null when not fresh then. */
  hit(v, now) {
    let h = this.hits.get(v)
    if (h !== undefined && h.since <= now && now < h.until) return h
    const f = this.rules.freshHit(v, now)
    if (f === null || f.varies) return null
    if (h === undefined) {
      h = new Hit(v, f)
      if (this.hitCount >= HITS_MAX) {
        this.hits = new WeakMap()
        this.hitCount = 0
      }
      this.hits.set(v, h)
      this.hitCount++
    } else {
      h.set(f)
    }
    return h
  }

  /**
   * What to do with a request that is not a plain hit (never throws):
   * `{ hit }`, `{ reply }`, `{ pass, unsafe, head }` (head: the Fill a HEAD's
   * 200 updates) or `{ fill }`. `rawHeaders`: a flat array of names and values.
   */
  decide(method, scheme, host, target, rawHeaders, client, now) {
    try {
      return this.#decide(method, scheme, host, target, rawHeaders, client, now)
    } catch (e) {
      this.warn('request not cached', e)
      if (method === 'PURGE' && this.o.purgeToken !== null) return { reply: this.purgeAnswer(4, false) }
      return { pass: native.httpFwdStatus('bypass', 'error'), unsafe: false, head: null }
    }
  }

  #decide(method, scheme, host, target, rawHeaders, client, now) {
    const r = new native.HttpRequest(this.rules, method, scheme, host ?? null, target, rawHeaders)
    const kind = r.kind
    if (kind === 2) return { pass: r.status, unsafe: r.invalidates, head: null }
    if (kind === 1) return { reply: this.purge(r, client) }
    const base = r.base
    const { stored, key } = this.lookup(r, base)
    if (stored !== null && r.plain) {
      const h = this.hit(stored, now)
      if (h !== null) return { hit: h }
    }
    const fill = new Fill(this, r, r.exchange(key, now), base, stored)
    const step = fill.x.lookup(stored ?? undefined, now)
    if (fill.x.holdsStale) fill.stale = stored
    switch (step.kind) {
      case 0: {
        const out = fill.reply(stored, step.status, now)
        return { reply: out, refresh: step.refresh ? fill : null }
      }
      case 1:
        return { reply: this.answer(this.rules.gatewayTimeout()) }
      case 2:
        return { pass: step.status, unsafe: false, head: step.headUpdate ? fill : null }
      default:
        return { fill }
    }
  }

  /** The stored response matching request `r` (null: none) and the key it lives (or is filled) under. */
  lookup(r, base) {
    const v = this.store.get(base)
    const found = r.find(v ?? undefined)
    if (found.kind === 0) return { stored: v, key: base }
    if (found.kind === 2) return { stored: null, key: base }
    const vv = this.store.get(found.key)
    return { stored: vv !== null && r.answers(vv) ? vv : null, key: found.key }
  }

  answer(a) {
    return reply(a.status, a.headers, a.body)
  }

  purgeAnswer(what, found) {
    return this.answer(this.rules.purgeAnswer(what, found))
  }

  /** A PURGE (its token checked): by its tags, else its URL. */
  purge(r, client) {
    const ask = r.purge(this.rules, this.purgeClients.has(client ?? ''))
    try {
      if (ask.kind === 2) {
        this.store.invalidateTags(ask.tags)
        return this.purgeAnswer(2, false)
      }
      if (ask.kind === 3) return this.purgeAnswer(3, this.store.purgeKey(ask.key))
      return this.purgeAnswer(ask.kind, false)
    } catch (e) {
      this.warn('purge failed', e)
      return this.purgeAnswer(4, false)
    }
  }

  /**
   * The client lines of a forwarded response; an unsafe method's success
   * invalidates its URL here, before the client sees the response.
   */
  passedHead(p, status, headers, scheme, host, target) {
    if (p.unsafe && status >= 200 && status < 400) {
      try {
        for (const key of native.httpInvalidatedKeys(scheme, host ?? null, target, headers)) this.store.purgeKey(key)
      } catch (e) {
        this.warn('invalidation failed', e)
      }
    }
    let cs = p.pass
    if (p.head !== null && status === 200) {
      let detail = 'head'
      try {
        detail = p.head.headResponse(headers, Date.now() / 1000)
      } catch (e) {
        this.warn('HEAD response not applied', e)
      }
      cs = native.httpFwdStatus('stale', detail, status)
    }
    return this.rules.clientHeaders(headers, 0, cs)
  }
}

module.exports = { Engine, Hit, EMPTY }
