'use strict'
// ziggurat/http on WHATWG fetch handlers, `(Request) => Response`: the same
// engine as node.cjs, with the app's Response read instead of a held-back
// ServerResponse.

const { coalesced, now } = require('./coalesce.cjs')
const { DEFAULTS } = require('./options.cjs')
const abandoned = require('./abandoned.cjs')

/** Flat lines from a Headers object (names lower-case, Set-Cookie one line each). */
function linesOf(headers) {
  const out = []
  for (const [k, v] of headers) out.push(k, v)
  return out
}

/** Pairs for a Response from flat lines. */
function pairs(lines) {
  const out = []
  for (let i = 0; i < lines.length; i += 2) out.push([lines[i], lines[i + 1]])
  return out
}

const NO_BODY = new Set([101, 103, 204, 205, 304])

function response(status, lines, body, method) {
  const b = method === 'HEAD' || NO_BODY.has(status) || body === null || body.length === 0 ? null : body
  return new Response(b, { status, headers: pairs(lines) })
}

/** The app's Response relayed with other lines; `rest` its body (a stream or null). */
function relayed(res, lines, rest) {
  return new Response(NO_BODY.has(res.status) ? null : rest, { status: res.status, statusText: res.statusText, headers: pairs(lines) })
}

/** A stream of `first` (chunks already read), then what `reader` still gives. */
function joined(first, reader) {
  let i = 0
  return new ReadableStream({
    async pull(controller) {
      if (i < first.length) {
        controller.enqueue(first[i++])
        return
      }
      const { done, value } = await reader.read()
      if (done) controller.close()
      else controller.enqueue(value)
    },
    cancel(reason) {
      return reader.cancel(reason)
    },
  })
}

/** Reads `stream` into a Buffer of at most `max` bytes; null once it is longer (its chunks in `seen`). */
async function readUpTo(reader, max, seen) {
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return Buffer.concat(seen, size)
    seen.push(value)
    size += value.byteLength
    if (size > max) return null
  }
}

function fetchHandler(engine, app) {
  return async (request, ...rest) => {
    const method = request.method
    const url = new URL(request.url)
    const scheme = url.protocol.slice(0, -1)
    const host = request.headers.get('host') ?? url.host
    const target = url.pathname + url.search
    const t = now()
    if (method === 'GET' || method === 'HEAD') {
      const h = engine.fresh(scheme, host, target, Object.fromEntries(request.headers), t)
      if (h !== null) return response(h.status, h.headers, h.body, method)
    }
    const client = rest[0]?.remoteAddress ?? rest[0]?.incoming?.socket?.remoteAddress ?? ''
    const d = engine.decide(method, scheme, host, target, linesOf(request.headers), client.replace(/^::ffff:/, ''), t)
    if (d.hit !== undefined) return response(d.hit.status, d.hit.headers, d.hit.body, method)
    if (d.reply !== undefined) {
      if (d.refresh) refresh(engine, app, request, d.refresh, rest)
      return response(d.reply.status, d.reply.headers, d.reply.body, method)
    }
    if (d.pass !== undefined) {
      const headers = new Headers(request.headers)
      headers.delete(DEFAULTS.purgeTokenHeader)
      const res = await app(new Request(request, { headers }), ...rest)
      const lines = engine.passedHead(d, res.status, linesOf(res.headers), scheme, host, target)
      return relayed(res, lines, res.body)
    }
    const fill = d.fill
    const out = await coalesced(engine, fill, () => run(engine, app, request, fill, rest))
    if (out.reply !== undefined) return response(out.reply.status, out.reply.headers, out.reply.body, method)
    return out.response
  }
}

/** Calls the app for `fill`; settles with `{ reply }` or `{ response }` once the response's fate is known. */
async function run(engine, app, request, fill, rest) {
  const t0 = now()
  const upstream = new Request(request, { headers: pairs(fill.upstreamHeaders()) })
  const called = Promise.resolve().then(() => app(upstream, ...rest))
  const limit = fill.appTimeout()
  let res
  if (limit === null) {
    res = await called
  } else {
    let timer
    const late = new Promise((resolve) => {
      timer = setTimeout(() => resolve(null), limit * 1000)
    })
    res = await Promise.race([called, late])
    clearTimeout(timer)
    const r = res === null && abandoned.calls.admit() ? fill.staleIfError(0, now(), 'stale-if-error-timeout') : null
    if (r !== null) {
      // The app runs on to its end; until then the URL is answered without it.
      const lock = fill.lock
      abandoned.calls.start(engine.cache, lock, engine.warn)
      const end = () => abandoned.calls.end(engine.cache, lock, engine.warn)
      called.then((late) => late.body?.cancel()).then(end, end)
      return { reply: r }
    }
    if (res === null) res = await called
  }
  const d = fill.head(res.status, linesOf(res.headers), t0, now())
  if (d.reply !== undefined) {
    res.body?.cancel()
    return { reply: d.reply }
  }
  if (d.headers !== undefined && !d.tee) return { response: relayed(res, d.headers, res.body) }
  if (d.tee) {
    if (res.body === null) return { response: relayed(res, d.headers, null) }
    const [mine, theirs] = res.body.tee()
    readUpTo(mine.getReader(), d.max, [])
      .then((body) => {
        if (body !== null) fill.storeStreamed(body, now())
      })
      .catch(() => {})
    return { response: relayed(res, d.headers, theirs) }
  }
  if (res.body === null) return { reply: fill.complete(Buffer.alloc(0), now()) }
  const reader = res.body.getReader()
  const seen = []
  const body = await readUpTo(reader, d.max, seen)
  if (body === null) return { response: relayed(res, fill.tooLarge(), joined(seen, reader)) }
  return { reply: fill.complete(body, now()) }
}

/** stale-while-revalidate: a background validation, one per URL per host. */
function refresh(engine, app, request, fill, rest) {
  const load = async () => {
    const out = await run(engine, app, request.clone(), fill, rest)
    await out.response?.body?.cancel()
    return fill.marker()
  }
  engine.cache
    .getOrSet(fill.refreshLock, load, { ttl: DEFAULTS.markerTtl, negTtl: engine.o.hitForMiss })
    .catch((err) => engine.warn('background refresh failed', err))
}

module.exports = { fetchHandler }
