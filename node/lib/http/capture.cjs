'use strict'
// A node:http response (ServerResponse) held back from its socket while the
// cache decides on it: the app writes as it always does (setHeader,
// writeHead, write, end); at its head the cache says what becomes of it:
// relayed as it comes (passed, or streamed and kept), buffered to be stored
// (then answered from what was stored), or dropped (the cache answered
// otherwise: a freshened or stale stored response, or the app took too long).

const { nextTick } = require('node:process')
const { writeLines } = require('./lines.cjs')

/** The header lines the app set on `res`, as a flat array of names and values. */
function outLines(res) {
  const out = []
  const h = res.getHeaders()
  for (const name in h) {
    const v = h[name]
    if (Array.isArray(v)) for (const item of v) out.push(name, String(item))
    else if (v !== undefined) out.push(name, String(v))
  }
  return out
}

/** `chunk` as a Buffer (a string in `encoding`). */
function bytes(chunk, encoding) {
  if (chunk === undefined || chunk === null) return null
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8')
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
}

class Capture {
  /**
   * @param res the ServerResponse
   * @param hooks `head(status, lines)` -> `{ headers, tee }` | `{ max }` | `{ reply }`;
   *   `end(body)` -> the reply for a buffered response; `tooLarge()` -> its client lines
   *   once it outgrew max; `streamed(body | null)` at a teed response's end;
   *   `settled()` once what becomes of the response is known (at the head, or for a
   *   buffered one at its end or overflow).
   */
  constructor(res, hooks) {
    this.res = res
    this.hooks = hooks
    this.orig = { writeHead: res.writeHead, write: res.write, end: res.end }
    this.mode = 'head'
    this.chunks = []
    this.size = 0
    this.max = 0
    this.ended = false
    res.writeHead = (status, message, headers) => this.writeHead(status, message, headers)
    res.write = (chunk, encoding, cb) => this.write(chunk, encoding, cb)
    res.end = (chunk, encoding, cb) => this.end(chunk, encoding, cb)
    res.flushHeaders = () => this.decide()
  }

  /**
   * The cache answered without the app, which runs on: what it writes goes
   * nowhere, and `ended` is called once it ends its response (or fails).
   */
  abandoned(ended) {
    this.mode = 'drop'
    this.ended = false
    this.onEnd = ended
  }

  /** Gives the response back to the app: its methods reach the socket again. */
  restore() {
    const res = this.res
    delete res.writeHead
    delete res.write
    delete res.end
    delete res.flushHeaders
  }

  /** Sends `status` and the flat `lines` as the head, and nothing the app set besides. */
  sendHead(status, lines) {
    const res = this.res
    for (const name of res.getHeaderNames()) res.removeHeader(name)
    writeLines(res, this.orig.writeHead, status, lines)
  }

  /** Answers the client with `r` now; whatever the app writes from now on is dropped. */
  answer(r) {
    if (this.mode === 'relay' || this.mode === 'tee' || this.mode === 'sent') return false
    this.mode = 'drop'
    this.sendHead(r.status, r.headers)
    this.orig.end.call(this.res, r.body)
    return true
  }

  writeHead(status, message, headers) {
    const res = this.res
    if (this.mode !== 'head') return res
    if (typeof message !== 'string') headers = message
    else res.statusMessage = message
    res.statusCode = status
    if (Array.isArray(headers)) {
      if (headers.length && Array.isArray(headers[0])) for (const [k, v] of headers) res.appendHeader(k, v)
      else for (let i = 0; i + 1 < headers.length; i += 2) res.appendHeader(headers[i], headers[i + 1])
    } else if (headers) {
      for (const k of Object.keys(headers)) res.setHeader(k, headers[k])
    }
    this.decide()
    return res
  }

  decide() {
    if (this.mode !== 'head') return
    const res = this.res
    const d = this.hooks.head(res.statusCode, outLines(res))
    if (d.reply !== undefined) {
      this.answer(d.reply)
    } else if (d.headers === undefined) {
      this.mode = 'buffer'
      this.max = d.max
    } else {
      this.sendHead(res.statusCode, d.headers)
      if (d.tee) {
        this.mode = 'tee'
        this.max = d.max ?? 0
      } else {
        this.mode = 'relay'
        this.restore()
      }
    }
    if (this.mode !== 'buffer') this.hooks.settled()
  }

  write(chunk, encoding, cb) {
    if (typeof encoding === 'function') {
      cb = encoding
      encoding = undefined
    }
    if (this.mode === 'head') this.decide()
    const b = bytes(chunk, encoding)
    switch (this.mode) {
      case 'buffer':
        if (b !== null) this.keep(b)
        if (this.size > this.max) return this.overflow(cb)
        if (cb) nextTick(cb)
        return true
      case 'tee':
        if (b !== null && this.chunks !== null) this.keep(b)
        if (this.size > this.max) this.chunks = null
        return this.orig.write.call(this.res, chunk, encoding, cb)
      case 'relay':
        return this.orig.write.call(this.res, chunk, encoding, cb)
      default:
        if (cb) nextTick(cb)
        return true
    }
  }

  keep(b) {
    this.chunks.push(b)
    this.size += b.length
  }

  /** A buffered body grew past max: the response is passed, what was buffered first. */
  overflow(cb) {
    const res = this.res
    this.sendHead(res.statusCode, this.hooks.tooLarge())
    this.mode = 'relay'
    this.restore()
    for (const c of this.chunks) this.orig.write.call(res, c)
    this.chunks = []
    this.hooks.settled()
    if (cb) nextTick(cb)
    return true
  }

  end(chunk, encoding, cb) {
    if (typeof chunk === 'function') {
      cb = chunk
      chunk = undefined
    } else if (typeof encoding === 'function') {
      cb = encoding
      encoding = undefined
    }
    if (this.ended) return this.res
    const res = this.res
    if (this.mode === 'head') this.decide()
    if (this.mode === 'relay') return this.orig.end.call(res, chunk, encoding, cb)
    if (chunk !== undefined && chunk !== null) this.write(chunk, encoding)
    // The body outgrew max with this last chunk: passed, already written.
    if (this.mode === 'relay') return this.orig.end.call(res, cb)
    switch (this.mode) {
      case 'buffer': {
        this.ended = true
        this.mode = 'sent'
        const r = this.hooks.end(Buffer.concat(this.chunks, this.size))
        this.chunks = []
        this.sendHead(r.status, r.headers)
        this.restore()
        this.orig.end.call(res, r.body, cb)
        this.hooks.settled()
        break
      }
      case 'tee': {
        this.ended = true
        this.mode = 'sent'
        this.restore()
        this.orig.end.call(res, cb)
        this.hooks.streamed(this.chunks === null ? null : Buffer.concat(this.chunks, this.size))
        break
      }
      case 'relay':
        return this.orig.end.call(res, chunk, encoding, cb)
      default:
        this.ended = true
        if (this.onEnd) this.onEnd()
        this.onEnd = null
        if (cb) nextTick(cb)
    }
    return res
  }
}

module.exports = { Capture, outLines }
