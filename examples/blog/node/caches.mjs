// The four ways the demo serves the blog's pages, each a node:http handler
// around the blog's `respond(req)` (a promise of { status, headers, body })
// with the `invalidateTags(...groups)` the blog purges through:
//
// - none: every request renders its page;
// - memory: the original design, a response store in each worker's memory,
//   cleared per group in the worker that made the change (the other workers
//   keep serving what they stored: the stale pages this demo counts);
// - redis: pages in Redis keyed by URL with their s-maxage, purged by group
//   with Redis sets, as page caches on Redis usually are;
// - ziggurat: ziggurat/http, one cache shared by every worker of the host.
import { Cache } from 'ziggurat'
import { HttpCache } from 'ziggurat/http'

/** Seconds a shared cache may keep a response with these lines (0: not at all). */
function ttlOf(headers) {
  const cc = headers
    .filter(([k]) => k.toLowerCase() === 'cache-control')
    .map(([, v]) => v)
    .join(', ')
    .toLowerCase()
  if (/no-store|private|no-cache/.test(cc)) return 0
  const s = /s-maxage\s*=\s*(\d+)/.exec(cc) ?? /max-age\s*=\s*(\d+)/.exec(cc)
  return s ? Number(s[1]) : 0
}

/** The groups a response names in Cache-Tag, and its lines without it. */
function split(headers) {
  const groups = []
  const kept = []
  for (const [k, v] of headers) {
    if (k.toLowerCase() === 'cache-tag') groups.push(...v.split(/[,\s]+/).filter(Boolean))
    else kept.push([k, v])
  }
  return { groups, kept }
}

/** Writes `r` to `res` (no body to HEAD), with `status` as Cache-Status when given. */
export function write(res, r, method, status) {
  const lines = r.headers.flat()
  if (status) lines.push('Cache-Status', status)
  lines.push('Content-Length', String(r.body.length))
  res.writeHead(r.status, lines)
  res.end(method === 'HEAD' ? undefined : r.body)
}

function keyOf(req) {
  return `${req.headers.host ?? ''}${req.url}`
}

export function none(respond) {
  return {
    handler: (req, res) => respond(req).then((r) => write(res, r, req.method)),
    invalidateTags: async () => {},
  }
}

export function memory(respond) {
  const pages = new Map()
  const groups = new Map()
  return {
    handler: async (req, res) => {
      const get = req.method === 'GET' || req.method === 'HEAD'
      const key = keyOf(req)
      const hit = get ? pages.get(key) : undefined
      if (hit !== undefined) return write(res, hit, req.method, 'memory; hit')
      const r = await respond(req)
      const { groups: named, kept } = split(r.headers)
      const page = { status: r.status, headers: kept, body: r.body }
      if (req.method === 'GET' && r.status === 200 && ttlOf(r.headers) > 0) {
        pages.set(key, page)
        for (const g of named) (groups.get(g) ?? groups.set(g, new Set()).get(g)).add(key)
      }
      write(res, page, req.method, 'memory; fwd=miss')
    },
    invalidateTags: async (...names) => {
      for (const g of names) {
        for (const key of groups.get(g) ?? []) pages.delete(key)
        groups.delete(g)
      }
    },
  }
}

export async function redis(respond, url) {
  const { default: Redis } = await import('ioredis')
  const r = new Redis(url)
  const PREFIX = 'blogpage:'
  return {
    handler: async (req, res) => {
      const key = `${PREFIX}${keyOf(req)}`
      if (req.method === 'GET' || req.method === 'HEAD') {
        const raw = await r.getBuffer(key)
        if (raw !== null) {
          const cut = raw.indexOf(10)
          const [status, headers] = JSON.parse(raw.subarray(0, cut).toString())
          return write(res, { status, headers, body: raw.subarray(cut + 1) }, req.method, 'redis; hit')
        }
      }
      const page = await respond(req)
      const { groups: named, kept } = split(page.headers)
      const ttl = req.method === 'GET' && page.status === 200 ? ttlOf(page.headers) : 0
      if (ttl > 0) {
        const head = Buffer.from(`${JSON.stringify([page.status, kept])}\n`)
        const p = r.pipeline().set(key, Buffer.concat([head, page.body]), 'EX', ttl)
        for (const g of named) p.sadd(`${PREFIX}tag:${g}`, key).expire(`${PREFIX}tag:${g}`, ttl)
        await p.exec()
      }
      write(res, { status: page.status, headers: kept, body: page.body }, req.method, 'redis; fwd=miss')
    },
    invalidateTags: async (...names) => {
      const sets = names.map((g) => `${PREFIX}tag:${g}`)
      const members = await Promise.all(sets.map((s) => r.smembers(s)))
      await r.del(...sets, ...members.flat())
    },
  }
}

export function ziggurat(respond, name, directory) {
  const cache = new Cache(name, { size: '64MiB', ...(directory ? { directory } : {}) })
  const pages = new HttpCache(cache, { allowedHosts: ['127.0.0.1', 'localhost'] })
  return {
    handler: pages.handler((req, res) => respond(req).then((r) => write(res, r, req.method))),
    invalidateTags: async (...names) => pages.invalidateTags(...names),
  }
}
