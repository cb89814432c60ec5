'use strict'
// ziggurat/http: a shared HTTP response cache (RFC 9111) on a ziggurat Cache,
// so every worker process of a host (Node.js or Python) serves what any of
// them stored, a purge through any of them clears it for all, and one call of
// the app fills a URL per host. Every decision is ziggurat-http's (the crate
// the Python middleware drives too): same keys, same stored format.

const { Cache } = require('./cache.cjs')
const { JOINED } = require('./lib/symbols.cjs')
const native = require('./lib/native.cjs')
const { settings } = require('./lib/http/options.cjs')
const { warner } = require('./lib/options.cjs')
const { Engine } = require('./lib/http/engine.cjs')
const { Store } = require('./lib/http/store.cjs')
const { NodeAdapter } = require('./lib/http/node.cjs')
const { fetchHandler } = require('./lib/http/fetch.cjs')

/** Marks a request that a background refresh routes through an Express app again. */
const REFRESH = Symbol('ziggurat.refresh')

/**
 * The HTTP response cache of one site on `cache`, with `options` (see
 * docs/node.md, "HTTP response cache"). Its adapters wrap a node:http
 * handler, Express, Fastify and WHATWG fetch handlers.
 *
 * @example
 * const pages = new HttpCache(new Cache('pages', { size: '256MiB' }), { allowedHosts: ['example.com'] })
 * http.createServer(pages.handler((req, res) => res.end('hello'))).listen(8000)
 */
class HttpCache {
  #engine
  #node
  #cache

  constructor(cache, options = {}) {
    if (!(cache instanceof Cache)) {
      throw new TypeError('new HttpCache(): cache must be a ziggurat Cache, as new Cache(name, options) makes')
    }
    if (cache[JOINED]) {
      throw new TypeError(
        'new HttpCache(): the cache is joined to the cluster tier (redis), which the HTTP response cache ' +
          'does not use from Node.js yet: give it a cache opened without redis (its pages are then shared by the host)',
      )
    }
    const { onWarning, ...rest } = options ?? {}
    if (onWarning !== undefined && typeof onWarning !== 'function') {
      throw new TypeError(`new HttpCache(): onWarning must be a function, not ${typeof onWarning}`)
    }
    const o = settings(rest)
    const warn = warner(onWarning)
    this.#cache = cache
    this.#engine = new Engine(cache, o, (what, e) => warn(`ziggurat/http: ${what}: ${e?.message ?? e}`))
    this.#node = new NodeAdapter(this.#engine)
  }

  /** The settings in effect (the defaults for those not given). */
  get options() {
    return this.#engine.o
  }

  /** The Cache the responses live in. */
  get cache() {
    return this.#cache
  }

  /**
   * A node:http request handler: `app` (`(req, res)`) behind the cache.
   *
   * @example
   * http.createServer(pages.handler(app)).listen(8000)
   */
  handler(app) {
    if (typeof app !== 'function') throw new TypeError('HttpCache.handler(): app must be a function (req, res)')
    const node = this.#node
    return (req, res) => node.handle(app, req, res, () => ({ app, req }))
  }

  /**
   * Express (or Connect) middleware: the routes after it are the app.
   *
   * @example
   * app.use(pages.express())
   */
  express() {
    const node = this.#node
    return (req, res, next) => {
      if (req[REFRESH]) return next()
      const again = () => ({
        req,
        app: (rq, rs) => {
          rq[REFRESH] = true
          rq.app.handle(rq, rs, (err) => {
            rs.statusCode = err ? 500 : 404
            rs.end()
          })
        },
      })
      const p = node.handle(() => next(), req, res, req.app?.handle ? again : undefined)
      if (p !== undefined) p.catch(next)
    }
  }

  /**
   * A Fastify plugin (register it with `fastify-plugin`'s encapsulation off,
   * or at the root): every route behind the cache.
   *
   * @example
   * fastify.register(pages.fastify())
   */
  fastify() {
    const node = this.#node
    const plugin = (fastify, _opts, done) => {
      fastify.addHook('onRequest', (request, reply, next) => {
        if (request.raw[REFRESH]) return next()
        // stale-while-revalidate: the background call runs through Fastify's router again.
        const again = () => ({
          req: request.raw,
          app: (rq, rs) => {
            rq[REFRESH] = true
            fastify.routing(rq, rs)
          },
        })
        const p = node.handle(() => next(), request.raw, reply.raw, again)
        if (p !== undefined) p.catch(next)
      })
      done()
    }
    // The hook reaches every route, not only those of the plugin's own scope.
    plugin[Symbol.for('skip-override')] = true
    return plugin
  }

  /**
   * A WHATWG fetch handler (`(Request) => Response`, as Hono, itty-router and
   * edge-style servers take): `app` behind the cache.
   *
   * @example
   * export default { fetch: pages.fetch(app.fetch) }
   */
  fetch(app) {
    if (typeof app !== 'function') throw new TypeError('HttpCache.fetch(): app must be a function (Request) => Response')
    return fetchHandler(this.#engine, app)
  }

  /**
   * Removes the stored responses of `url` (GET and HEAD, every Vary variant)
   * in every process of the host; whether something was stored.
   *
   * @example
   * pages.purge('https://example.com/posts/') // true
   */
  purge(url) {
    if (typeof url !== 'string') throw new TypeError(`HttpCache.purge(): url must be a string, not ${typeof url}`)
    const key = native.httpUrlKey(url)
    if (key === null) {
      throw new RangeError(`HttpCache.purge(): url must be an absolute http(s) URL with a valid host, got ${JSON.stringify(url)}`)
    }
    return new Store(this.#cache).purgeKey(key)
  }

  /**
   * Voids every stored response carrying any of `tags` (from the tag header)
   * in every process of the host.
   *
   * @example
   * pages.invalidateTags('posts', 'post:7')
   */
  invalidateTags(...tags) {
    this.#cache.invalidateTags(...tags)
  }
}

module.exports = { HttpCache }
module.exports.default = module.exports
