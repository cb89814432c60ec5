'use strict'
// ziggurat/http on node:http: a request handler `(req, res)` wrapped, or
// Express middleware (the app is then the rest of the chain, `next()`). The
// plain hit is answered here with one read of the cache; anything else goes
// to the engine's full rules, and a fill runs the app with its response held
// back (capture.cjs) until the cache has decided on it.

const { ServerResponse } = require('node:http')
const { Capture } = require('./capture.cjs')
const { writeLines } = require('./lines.cjs')
const { coalesced, now } = require('./coalesce.cjs')
const { DEFAULTS } = require('./options.cjs')
const abandoned = require('./abandoned.cjs')

/** The address a PURGE came from, as an allow-list names it. */
function clientOf(req) {
  const a = req.socket?.remoteAddress ?? ''
  return a.startsWith('::ffff:') ? a.slice(7) : a
}

/** The request's target as it came (Express rewrites req.url under a mount path). */
function targetOf(req) {
  return req.originalUrl ?? req.url
}

function send(res, r, method) {
  for (const name of res.getHeaderNames()) res.removeHeader(name)
  writeLines(res, res.writeHead, r.status, r.headers)
  res.end(method === 'HEAD' ? undefined : r.body)
}

/** Sends a plain hit (its lines made once per second: `repeats` said whether they name a field twice). */
function sendHit(res, h, method) {
  if (h.repeats) writeLines(res, res.writeHead, h.status, h.headers)
  else res.writeHead(h.status, h.headers)
  res.end(method === 'HEAD' ? undefined : h.body)
}

/** Sets the request lines the app reads (`lines` flat, names lower-case). */
function setHeaders(req, lines) {
  const h = Object.create(null)
  for (let i = 0; i < lines.length; i += 2) {
    const k = lines[i]
    const v = lines[i + 1]
    if (h[k] === undefined) h[k] = k === 'set-cookie' ? [v] : v
    else if (k === 'set-cookie') h[k].push(v)
    else h[k] += k === 'cookie' ? `; ${v}` : `, ${v}`
  }
  req.headers = h
  req.rawHeaders = lines
}

/** The cache's own request header (the purge token), under both spellings a server may give it. */
const PURGE_TOKEN = new Set([DEFAULTS.purgeTokenHeader, DEFAULTS.purgeTokenHeader.replaceAll('-', '_')])

/** The request lines without the cache's own (its purge token), for a request passed to the app. */
function forApp(req) {
  const raw = req.rawHeaders
  for (let i = 0; i < raw.length; i += 2) {
    if (!PURGE_TOKEN.has(raw[i].toLowerCase())) continue
    const kept = []
    for (let j = 0; j < raw.length; j += 2) {
      const n = raw[j].toLowerCase()
      if (!PURGE_TOKEN.has(n)) kept.push(n, raw[j + 1])
    }
    setHeaders(req, kept)
    return
  }
}

/**
 * Calls `app(req, res)`; a throw or a rejected promise rejects `onError`.
 */
function call(app, req, res, onError) {
  try {
    const p = app(req, res)
    if (p !== null && typeof p === 'object' && typeof p.then === 'function') p.then(null, onError)
  } catch (e) {
    onError(e)
  }
}

class NodeAdapter {
  constructor(engine) {
    this.engine = engine
    /** Refresh locks with a background refresh running in this process. */
    this.refreshing = new Set()
  }

  /** Serves `req` with `app` (`(req, res)`; for Express, the rest of the chain). */
  handle(app, req, res, refresh) {
    const method = req.method
    const scheme = req.socket?.encrypted ? 'https' : 'http'
    const t = now()
    if (method === 'GET' || method === 'HEAD') {
      const h = this.engine.fresh(scheme, req.headers.host, targetOf(req), req.headers, t)
      if (h !== null) {
        sendHit(res, h, method)
        return undefined
      }
    }
    return this.full(app, req, res, method, scheme, t, refresh)
  }

  async full(app, req, res, method, scheme, t, refresh) {
    const e = this.engine
    const host = req.headers.host
    const target = targetOf(req)
    const d = e.decide(method, scheme, host, target, req.rawHeaders, clientOf(req), t)
    if (d.hit !== undefined) {
      sendHit(res, d.hit, method)
      return
    }
    if (d.reply !== undefined) {
      send(res, d.reply, method)
      if (d.refresh) this.refresh(d.refresh, refresh)
      return
    }
    if (d.pass !== undefined) {
      forApp(req)
      return this.pass(app, req, res, d, scheme, host, target)
    }
    return this.fill(app, req, res, d.fill, method)
  }

  pass(app, req, res, p, scheme, host, target) {
    const e = this.engine
    const capture = new Capture(res, {
      head: (status, lines) => {
        try {
          return { headers: e.passedHead(p, status, lines, scheme, host, target) }
        } catch (err) {
          e.warn('response head left as is', err)
          return { headers: lines }
        }
      },
      settled() {},
    })
    return new Promise((resolve, reject) => {
      res.once('close', resolve)
      call(app, req, res, (err) => {
        capture.restore()
        reject(err)
      })
    })
  }

  async fill(app, req, res, fill, method) {
    let capture
    const run = () => this.run(app, req, res, fill, (c) => (capture = c))
    let out
    try {
      out = await coalesced(this.engine, fill, run)
    } catch (err) {
      capture?.restore()
      throw err
    }
    if (out !== undefined && out.reply !== undefined) {
      if (capture === undefined) send(res, out.reply, method)
      else if (!capture.answer(out.reply)) capture.restore()
    }
  }

  /**
   * Runs the app for `fill` with its response held back; settles with the
   * outcome once what becomes of the response is known ({ reply } when the
   * cache answers instead, else undefined: the capture sent it), or rejects
   * with the app's error before its head.
   */
  run(app, req, res, fill, took) {
    const t0 = now()
    setHeaders(req, fill.upstreamHeaders())
    return new Promise((resolve, reject) => {
      let settled = false
      let timer = null
      const done = (v) => {
        if (settled) return
        settled = true
        if (timer !== null) clearTimeout(timer)
        resolve(v)
      }
      const capture = new Capture(res, {
        head: (status, lines) => fill.head(status, lines, t0, now()),
        end: (body) => fill.complete(body, now()),
        tooLarge: () => fill.tooLarge(),
        streamed: (body) => {
          if (body !== null) fill.storeStreamed(body, now())
        },
        settled: () => done(undefined),
      })
      took(capture)
      const limit = fill.appTimeout()
      if (limit !== null) {
        timer = setTimeout(() => {
          timer = null
          if (capture.mode !== 'head' || !abandoned.calls.admit()) return
          const r = fill.staleIfError(0, now(), 'stale-if-error-timeout')
          if (r === null) return
          // The app runs on to its end, what it writes going nowhere; until then the URL
          // is answered without it (see abandoned.cjs).
          const e = this.engine
          const lock = fill.lock
          abandoned.calls.start(e.cache, lock, e.warn)
          capture.abandoned(() => abandoned.calls.end(e.cache, lock, e.warn))
          done({ reply: r })
        }, limit * 1000)
        timer.unref?.()
      }
      call(app, req, res, (err) => {
        if (settled) {
          // An abandoned call that failed has ended too.
          capture.onEnd?.()
          capture.onEnd = null
          this.engine.warn('the app failed after its response head', err)
          return
        }
        settled = true
        if (timer !== null) clearTimeout(timer)
        reject(err)
      })
    })
  }

  /** stale-while-revalidate: one background validation per URL per host. */
  refresh(fill, start) {
    const lock = typeof fill.refreshLock === 'string' ? fill.refreshLock : fill.refreshLock.toString('latin1')
    if (start === undefined || this.refreshing.has(lock)) return
    this.refreshing.add(lock)
    const e = this.engine
    const load = async () => {
      const { app, req } = start()
      const res = new ServerResponse(req)
      await this.run(app, req, res, fill, () => {})
      return fill.marker()
    }
    e.cache
      .getOrSet(fill.refreshLock, load, { ttl: DEFAULTS.markerTtl, negTtl: e.o.hitForMiss })
      .catch((err) => e.warn('background refresh failed', err))
      .finally(() => this.refreshing.delete(lock))
  }
}

module.exports = { NodeAdapter, send }
