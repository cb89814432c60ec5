'use strict'
// One request the cache cannot answer alone, over ziggurat-http's Exchange:
// the crate decides each step (what the app gets, what its head means, what
// is stored, what the requests that waited on the fill do); this file reads
// and writes through the store and builds the answers. No transport: the
// adapters (node.cjs, fetch.cjs) run the app and feed its head and body.

const native = require('../native.cjs')
const { DEFAULTS } = require('./options.cjs')

/** What the requests waiting on a fill read, by the crate's marker number (3: nothing, a cached miss). */
const MARKERS = ['S', 'E', 'T', null]
const STORED = 'S'
const ERROR = 'E'
// Outcomes of a write, by the crate's numbers.
const SAVED = 0
const PURGED = 1
const FAILED = 2

/** A response the cache sends itself: status, header lines (flat), body. */
function reply(status, headers, body) {
  return { status, headers, body }
}

class Fill {
  /**
   * @param engine the Engine
   * @param request the addon's HttpRequest
   * @param x its HttpExchange
   * @param base the URL's key; `stored`: the value found (null: none)
   */
  constructor(engine, request, x, base, stored) {
    this.engine = engine
    this.rules = engine.rules
    this.store = engine.store
    this.request = request
    this.x = x
    this.base = base
    this.lock = native.httpLockKey(x.key)
    this.refreshLock = native.httpRefreshLockKey(x.key)
    // Taken before the app is called (see store.cjs).
    this.seen = this.store.snapshot(base)
    this.stale = x.holdsStale ? stored : null
    this.moved = false
    this.status = 0
    this.requestTime = 0
  }

  get coalesce() {
    return this.x.coalesce
  }

  get tee() {
    return this.x.tee
  }

  /** The stored value `v` as this request's answer with the Cache-Status member `cs`. */
  reply(v, cs, now) {
    const r = this.x.reply(this.rules, v, now, cs)
    return reply(r.status, r.headers, r.body ? v.subarray(r.bodyStart, r.bodyEnd) : Buffer.alloc(0))
  }

  /** The response stored for this request now, or null. */
  current() {
    try {
      return this.engine.lookup(this.request, this.base).stored
    } catch {
      return null
    }
  }

  /** Inside the fill's lease, before the app: a response another process stored meanwhile. */
  recheck(now) {
    const v = this.current()
    if (v === null) return null
    const cs = this.x.recheck(v, now)
    return cs === null ? null : this.reply(v, cs, now)
  }

  /** After waiting on another fill: the stored response if it may answer now, else null. */
  afterWait(marker, now) {
    if (marker === null || marker === undefined) return null
    const { stored, key } = this.engine.lookup(this.request, this.base)
    // The fill waited on may have stored another Vary variant: a second round waits on this one's.
    this.moved = this.x.rekey(key)
    this.lock = native.httpLockKey(key)
    this.refreshLock = native.httpRefreshLockKey(key)
    if (stored === null) return null
    const cs = this.x.collapsed(stored, now)
    if (cs !== null) return this.reply(stored, cs, now)
    if (marker === ERROR) return this.staleIfError(0, now)
    return null
  }

  /**
   * Whether to wait once more after a marker that led to no usable response:
   * a marker older than this request (its response was purged or went stale)
   * is removed, and the requests that meet here coalesce again.
   */
  retryWait(marker, attempt) {
    if (attempt || marker === null || marker === undefined || marker === ERROR) return false
    if (this.moved) return true
    try {
      this.engine.cache.delete(this.lock)
    } catch {
      return false
    }
    return true
  }

  /** The stale response when the app failed (`status` 0 for no answer), if allowed; else null. */
  staleIfError(status, now, detail = 'stale-if-error') {
    const v = this.stale ?? this.current()
    if (v === null) return null
    const cs = this.x.staleIfError(this.rules, v, status, detail, now)
    return cs === null ? null : this.reply(v, cs, now)
  }

  /** Seconds to wait for the app's head before serving stale, or null (wait). */
  appTimeout() {
    return this.x.appTimeout(this.engine.o.appTimeout ?? undefined)
  }

  /** The request lines for the app: the client's validators replaced by the stored response's. */
  upstreamHeaders() {
    return this.x.upstreamHeaders(this.engine.o.surrogateControl ? DEFAULTS.surrogateCapability : undefined)
  }

  /**
   * Decides on the app's head: `{ reply }` to send instead of the app's
   * response; `{ headers }` when it passes uncached (or streams: `tee`);
   * `{ max }` to buffer up to that many body bytes, then complete() or tooLarge().
   */
  head(status, headers, requestTime, now) {
    this.requestTime = requestTime
    this.status = status
    this.headers = headers
    try {
      return this.#head(status, headers, requestTime, now)
    } catch (e) {
      this.engine.warn('response not cached', e)
      return { headers: this.pass(headers, 'error', status) }
    }
  }

  #head(status, headers, requestTime, now) {
    let held = this.stale
    let current
    if (held === null && this.x.needsCurrent(status)) {
      held = this.current()
      current = held ?? undefined
    }
    const step = this.x.head(this.rules, current, status, headers, requestTime, now)
    switch (step.kind) {
      case 4:
        if (this.x.tee) return { headers: this.teeHeaders(), tee: true, max: this.engine.o.maxBody }
        return { max: this.engine.o.maxBody }
      case 3:
        return { headers: this.pass(headers, step.detail, status) }
      case 0: {
        // RFC 9111 §4.3.4: a 304 to our validation updates the stored headers.
        this.replace(step.value, step.ttl, step.tags)
        this.stale = null
        return { reply: this.reply(step.value, step.status, now) }
      }
      case 1:
        this.engine.cache.delete(this.x.key)
        return { reply: this.reply(held, step.status, now) }
      default:
        return { reply: this.reply(held, step.status, now) }
    }
  }

  /** The client lines of the app's response passed uncached for `detail`. */
  pass(headers, detail, status) {
    return this.rules.clientHeaders(headers, 0, this.x.passStatus(status, detail))
  }

  /** The client lines of a response relayed as it comes, stored at its end if it fits. */
  teeHeaders() {
    return this.rules.clientHeaders(this.headers, 1, this.x.passStatus(this.status, 'streamed'))
  }

  /** The client lines when the body outgrew maxBody while buffered. */
  tooLarge() {
    return this.pass(this.headers, 'too-large', this.status)
  }

  /** Stores a streamed response whose body ended within maxBody. */
  storeStreamed(body, now) {
    this.#save(body, now)
  }

  /** Stores the buffered response; what the client gets. */
  complete(body, now) {
    const { value, cs, initialAge } = this.#save(body, now)
    if (value !== null && this.x.answersValidators(this.status)) {
      const r = this.reply(value, cs, now)
      if (r.status === 304) return r
    }
    const sent = { status: this.status, initialAge, bodyLength: body.length }
    const headers = this.rules.clientHeaders(this.headers, 2, cs, sent.status, sent.initialAge, sent.bodyLength)
    return reply(this.status, headers, body)
  }

  #save(body, now) {
    let outcome = SAVED
    let done = null
    try {
      const record = this.store.get(this.base)
      done = this.x.complete(body, now, record ?? undefined, this.store.fresh(), this.store.guarded(this.seen))
      if (!this.store.save(this.base, done.writes, this.seen)) outcome = PURGED
    } catch (e) {
      this.engine.warn('storing a response failed', e)
      outcome = FAILED
    }
    const cs = this.x.saved(this.status, outcome)
    return { value: done?.value ?? null, cs, initialAge: done?.initialAge ?? 0 }
  }

  /** Writes a freshened response in place under this fill's key, unless a purge came since. */
  replace(value, ttl, tags) {
    try {
      const w = { key: this.x.key, value, ttl, tags }
      if (this.store.save(this.base, [w], this.seen)) this.x.saved(this.status, SAVED)
    } catch (e) {
      this.engine.warn('freshening a response failed', e)
    }
  }

  /**
   * RFC 9111 §4.3.5: a 200 to this forwarded HEAD freshens the stored GET
   * response when it describes the same representation, else removes it.
   * Returns the Cache-Status detail.
   */
  headResponse(headers, now) {
    const held = this.stale
    this.stale = null
    if (held === null) return 'head'
    const current = this.current()
    // Purged or replaced meanwhile: this HEAD describes neither for sure.
    if (current === null || !current.equals(held)) return 'head'
    const u = this.x.headUpdate(this.rules, headers, now)
    if (u.kind === 0) return 'head'
    if (u.kind === 1) {
      this.engine.cache.delete(this.x.key)
      return 'head-invalidated'
    }
    this.replace(u.value, u.ttl, u.tags)
    return 'head-freshened'
  }

  /** What the requests waiting on this fill are told (null: a cached miss, not waited on for hitForMiss). */
  marker() {
    return MARKERS[this.x.marker()]
  }
}

module.exports = { Fill, reply, STORED, ERROR }
