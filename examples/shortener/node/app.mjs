// The shortener's HTTP app for one Node.js worker: the routes, status codes, headers and
// cache entries of the Python app (examples/shortener/app.py), so that Python and Node.js
// workers serve one link table through one host cache. A link's cache entry is its slug
// and its target as a string (JSON text in the segment): what either language stores, the
// other reads.

import { randomInt } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { Cache } from 'ziggurat'
import { Links, SlugTaken } from './links.mjs'

export const MODES = ['none', 'l2', 'l1+l2']
const SLUG_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/
const SLUG_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
const TARGET_RE = /^https?:\/\/[^/?#]/i
// What Starlette's RedirectResponse leaves unescaped in a Location header (the rest is
// percent-encoded as UTF-8), so that both apps send the same header for one target.
const LOCATION_UNSAFE = /[^A-Za-z0-9_.~\-:/%#?=@[\]!$&'()*+,;]/gu
const MAX_BODY = 64 * 1024
const STATS_INTERVAL_MS = 200

/**
 * The cache of a mode, opened with the settings the Python app reads from the environment,
 * or null for 'none'.
 *
 * @example
 * const cache = openCache('l1+l2', { SHORTENER_CACHE_NAME: 'shortener' })
 */
export function openCache(mode, env) {
  if (mode === 'none') return null
  const options = {
    size: env.SHORTENER_CACHE_SIZE || '64MiB',
    ttl: Number(env.SHORTENER_CACHE_TTL || 300),
  }
  if (mode === 'l2') options.l1Items = 0 // every lookup reads the shared segment
  else if (env.SHORTENER_L1_ITEMS) options.l1Items = Number(env.SHORTENER_L1_ITEMS)
  if (env.SHORTENER_CACHE_DIR) options.directory = env.SHORTENER_CACHE_DIR
  if (env.SHORTENER_REDIS_URL) {
    // The cluster tier: every host of the app on one Redis or Valkey. Without a secret the
    // Cache refuses the URL and says why: the worker does not start.
    options.redis = env.SHORTENER_REDIS_URL
    options.secret = env.SHORTENER_SECRET
  }
  return new Cache(env.SHORTENER_CACHE_NAME || 'shortener', options)
}

/**
 * One worker's state: its database connection, its cache, its counters.
 *
 * @example
 * const app = await Shortener.start(process.env)
 * http.createServer((req, res) => app.handle(req, res)).listen(8000)
 */
export class Shortener {
  lookups = 0
  redirects = 0
  notFound = 0

  constructor(mode, links, cache, statsDir) {
    this.mode = mode
    this.links = links
    this.cache = cache
    this.statsDir = statsDir
    this.pid = process.pid
    this.timer = null
  }

  static async start(env) {
    const mode = (env.SHORTENER_CACHE || 'l1+l2').trim().toLowerCase()
    if (!MODES.includes(mode)) {
      throw new RangeError(`SHORTENER_CACHE must be one of ${MODES.join(', ')}: ${JSON.stringify(mode)}`)
    }
    const url = env.SHORTENER_DATABASE_URL
    if (!url) throw new RangeError('SHORTENER_DATABASE_URL must name the PostgreSQL database (postgresql://...)')
    const links = await Links.open(url)
    const app = new Shortener(mode, links, openCache(mode, env), env.SHORTENER_STATS_DIR || null)
    if (app.statsDir) {
      app.writeStats()
      app.timer = setInterval(() => app.writeStats(), STATS_INTERVAL_MS)
      app.timer.unref()
    }
    return app
  }

  /** The target of `slug`: through the cache, or straight from the database. */
  async lookup(slug) {
    this.lookups++
    if (this.cache === null) return this.links.target(slug)
    // Read-through, one load per key for the whole host (Python workers included); a null
    // (no such link) is cached as a miss, so unknown slugs do not reach the database.
    const target = await this.cache.getOrSet(slug, () => this.links.target(slug))
    return target ?? null
  }

  /**
   * After a database write: every worker of the host, in either language, sees it at once
   * (and with the cluster tier, every host within its lag; the write is then a promise).
   */
  async publish(slug, target) {
    if (this.cache !== null) await this.cache.set(slug, target)
  }

  stats() {
    let cache = null
    if (this.cache !== null) {
      try {
        cache = this.cache.stats()
      } catch (e) {
        cache = { error: String(e) } // the figures must not take the worker down
      }
    }
    return {
      pid: this.pid,
      time: Date.now() / 1000,
      language: 'node',
      mode: this.mode,
      database: 'PostgreSQL',
      lookups: this.lookups,
      redirects: this.redirects,
      not_found: this.notFound,
      db_reads: this.links.reads,
      db_writes: this.links.writes,
      db_queries: this.links.queries,
      cache,
    }
  }

  writeStats() {
    const file = path.join(this.statsDir, `${this.pid}.json`)
    const doc = JSON.stringify(this.stats(), (_, v) => (typeof v === 'bigint' ? Number(v) : v))
    fs.writeFileSync(`${file}.tmp`, doc)
    fs.renameSync(`${file}.tmp`, file) // readers never see a half-written file
  }

  async close() {
    if (this.timer !== null) clearInterval(this.timer)
    if (this.statsDir) this.writeStats()
    this.cache?.close() // the segment stays for the other workers
    await this.links.close()
  }

  /** The request handler: GET /{slug}, POST /links, PUT /links/{slug}, GET /_stats. */
  handle(req, res) {
    this.#route(req, res).catch((e) => {
      console.error(e)
      if (!res.headersSent) send(res, 500, { error: 'internal error' }, this.pid)
      else res.destroy()
    })
  }

  async #route(req, res) {
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    const p = q < 0 ? url : url.slice(0, q)
    if (p === '/_stats') {
      if (req.method !== 'GET') return methodNotAllowed(res, 'GET')
      return send(res, 200, this.stats())
    }
    if (p === '/links') {
      if (req.method !== 'POST') return methodNotAllowed(res, 'POST')
      return this.#create(req, res)
    }
    if (p.startsWith('/links/') && p.indexOf('/', 7) < 0) {
      if (req.method !== 'PUT') return methodNotAllowed(res, 'PUT')
      return this.#update(req, res, unescape(p.slice(7)))
    }
    if (p.indexOf('/', 1) < 0 && p.length > 1) {
      if (req.method !== 'GET') return methodNotAllowed(res, 'GET')
      return this.#redirect(res, unescape(p.slice(1)))
    }
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'content-length': 9 })
    res.end('Not Found')
  }

  async #redirect(res, slug) {
    const target = SLUG_RE.test(slug) ? await this.lookup(slug) : null
    if (target === null) {
      this.notFound++
      const body = 'no such link\n'
      res.writeHead(404, {
        'content-type': 'text/plain; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        'x-served-by': String(this.pid),
      })
      res.end(body)
      return
    }
    this.redirects++
    const location = target.replace(LOCATION_UNSAFE, encodeURIComponent)
    res.writeHead(302, { location, 'content-length': 0, 'x-served-by': String(this.pid) })
    res.end()
  }

  async #create(req, res) {
    const body = await jsonBody(req)
    if (body === null) return send(res, 400, { error: 'the body must be a JSON object' })
    const target = validTarget(body.target)
    if (target === null) return send(res, 400, { error: 'target must be an http:// or https:// URL' })
    let slug = body.slug
    if (slug !== undefined && slug !== null) {
      if (typeof slug !== 'string' || !SLUG_RE.test(slug)) {
        return send(res, 400, { error: 'slug must match [A-Za-z0-9][A-Za-z0-9_-]{0,63}' })
      }
      try {
        await this.links.create(slug, target)
      } catch (e) {
        if (e instanceof SlugTaken) return send(res, 409, { error: `slug '${slug}' is taken` })
        throw e
      }
    } else {
      slug = null
      for (let i = 0; i < 8 && slug === null; i++) {
        const candidate = Array.from({ length: 7 }, () => SLUG_ALPHABET[randomInt(SLUG_ALPHABET.length)]).join('')
        try {
          await this.links.create(candidate, target)
          slug = candidate
        } catch (e) {
          if (!(e instanceof SlugTaken)) throw e
        }
      }
      if (slug === null) return send(res, 503, { error: 'could not find a free slug' })
    }
    // The database is written first, then the cache: a reader that misses the cache after
    // this point loads the new row; one that hits it gets the value set here.
    await this.publish(slug, target)
    const base = `http://${req.headers.host ?? 'localhost'}/`
    send(res, 201, { slug, target, url: `${base}${slug}` }, this.pid, { location: `/${slug}` })
  }

  async #update(req, res, slug) {
    const body = await jsonBody(req)
    if (body === null) return send(res, 400, { error: 'the body must be a JSON object' })
    const target = validTarget(body.target)
    if (target === null) return send(res, 400, { error: 'target must be an http:// or https:// URL' })
    if (!SLUG_RE.test(slug) || !(await this.links.update(slug, target))) {
      return send(res, 404, { error: 'no such link' })
    }
    await this.publish(slug, target)
    send(res, 200, { slug, target }, this.pid)
  }
}

/** A path segment's text; '' (no link has it) if its escapes are not UTF-8. */
function unescape(segment) {
  try {
    return decodeURIComponent(segment)
  } catch {
    return ''
  }
}

function validTarget(target) {
  if (typeof target !== 'string' || target.length > 2048 || !TARGET_RE.test(target)) return null
  if (!target.isWellFormed()) return null // a lone surrogate has no UTF-8 form
  return target
}

/** The request's body as a JSON object, or null if it is not one. */
async function jsonBody(req) {
  const chunks = []
  let size = 0
  for await (const chunk of req) {
    size += chunk.length
    if (size > MAX_BODY) return null
    chunks.push(chunk)
  }
  try {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    return body !== null && typeof body === 'object' && !Array.isArray(body) ? body : null
  } catch {
    return null
  }
}

function send(res, status, doc, pid, headers = {}) {
  const body = JSON.stringify(doc, (_, v) => (typeof v === 'bigint' ? Number(v) : v))
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...(pid === undefined ? {} : { 'x-served-by': String(pid) }),
    ...headers,
  })
  res.end(body)
}

function methodNotAllowed(res, allow) {
  res.writeHead(405, { allow, 'content-type': 'text/plain; charset=utf-8', 'content-length': 18 })
  res.end('Method Not Allowed')
}
