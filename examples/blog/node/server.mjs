// The blog in Node.js under cluster: BLOG_WORKERS workers (4) on one port, each
// with its own PostgreSQL connection, its pages served through the page cache
// BLOG_PAGE_CACHE names (none, memory, redis or ziggurat; see caches.mjs).
//
//   BLOG_DB=postgresql://... PORT=8000 node examples/blog/node/server.mjs
//
// Settings: BLOG_DB (the database; its tables are the Python blog's, made and
// seeded by `python -m examples.blog` or the demo), PORT (8000), BLOG_WORKERS,
// BLOG_PAGE_CACHE (ziggurat), BLOG_CACHE (the cache's name, "blog-node"),
// BLOG_CACHE_DIR (its directory), BLOG_REDIS_URL, BLOG_ADMIN_TOKEN (printed
// when made here), BLOG_COUNT_FILE (a byte appended per request that reaches
// the blog). Every response names its worker in X-Served-By.
import cluster from 'node:cluster'
import http from 'node:http'
import { openSync, writeSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { Blog } from './site.mjs'
import { Store } from './store.mjs'
import * as caches from './caches.mjs'

const env = process.env
const WORKERS = Number(env.BLOG_WORKERS ?? 4)
const PORT = Number(env.PORT ?? 8000)
const MODE = env.BLOG_PAGE_CACHE ?? 'ziggurat'

if (cluster.isPrimary) {
  if (!env.BLOG_DB) {
    console.error('BLOG_DB must name the database (postgresql://...)')
    process.exit(2)
  }
  if (!['none', 'memory', 'redis', 'ziggurat'].includes(MODE)) {
    console.error('BLOG_PAGE_CACHE must be none, memory, redis or ziggurat')
    process.exit(2)
  }
  env.BLOG_ADMIN_TOKEN ??= randomBytes(16).toString('hex')
  for (let i = 0; i < WORKERS; i++) cluster.fork()
  cluster.on('exit', (w, code, signal) => {
    if (!w.exitedAfterDisconnect && signal !== 'SIGTERM') console.error(`worker ${w.process.pid} died (${signal ?? code})`)
  })
  const stop = () => {
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM')
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  console.log(`blog on http://127.0.0.1:${PORT}/ (${WORKERS} workers, page cache: ${MODE}); admin token ${env.BLOG_ADMIN_TOKEN}`)
} else {
  const store = new Store(env.BLOG_DB)
  await store.connect()
  const counter = env.BLOG_COUNT_FILE ? openSync(env.BLOG_COUNT_FILE, 'a') : null
  const purger = { invalidateTags: (...g) => cache.invalidateTags(...g) }
  const blog = new Blog(store, purger, env.BLOG_ADMIN_TOKEN)

  /** The blog's response to a node:http request. */
  async function respond(req) {
    if (counter !== null) writeSync(counter, '.')
    const url = new URL(req.url, 'http://blog')
    let form = {}
    if (req.method === 'POST') {
      const chunks = []
      for await (const c of req) chunks.push(c)
      form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString()))
    }
    try {
      return await blog.handle({ method: req.method, path: url.pathname, form, headers: req.headers })
    } catch (e) {
      console.error(e)
      return blog.text(500, 'server error')
    }
  }

  const cache =
    MODE === 'memory'
      ? caches.memory(respond)
      : MODE === 'redis'
        ? await caches.redis(respond, env.BLOG_REDIS_URL)
        : MODE === 'ziggurat'
          ? caches.ziggurat(respond, env.BLOG_CACHE ?? 'blog-node', env.BLOG_CACHE_DIR)
          : caches.none(respond)
  const pid = String(process.pid)
  const server = http.createServer((req, res) => {
    // Added outside the cache, so that a hit names the worker that served it.
    const writeHead = res.writeHead
    res.writeHead = function (status, lines) {
      if (Array.isArray(lines)) return writeHead.call(this, status, [...lines, 'X-Served-By', pid])
      this.setHeader('X-Served-By', pid)
      return writeHead.call(this, status, lines)
    }
    const p = cache.handler(req, res)
    if (p) p.catch((e) => console.error(e))
  })
  server.keepAliveTimeout = 5000
  server.listen(PORT, '127.0.0.1')
  process.on('SIGTERM', () => {
    server.close()
    store.close().finally(() => process.exit(0))
  })
}
