// One server of the HTTP hit-path benchmark (http.mjs): argv[2] the kind, argv[3] the
// cache's name, argv[4] Redis's port (for the Redis page cache). Every kind answers
// GET /page with the same 8 KiB page (max-age=600); it prints {"port"} once listening.
import http from 'node:http'
import express from 'express'
import Fastify from 'fastify'
import apicache from 'apicache'
import Redis from 'ioredis'
import { Cache } from '../../node/index.js'
import { HttpCache } from '../../node/http.js'

const [kind, name, redisPort] = process.argv.slice(2)
const PAGE = Buffer.from(`<!doctype html><title>post</title>${'<p>lorem ipsum dolor sit amet</p>'.repeat(236)}`).subarray(0, 8192)
const HEADERS = { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'max-age=600' }
const pages = kind.endsWith('-zig') ? new HttpCache(new Cache(name, { size: '64MiB' })) : null

function listening(server) {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`)
}

/** A page cache on Redis, as the Express middlewares for it do: the body and its type under the URL. */
function redisPages(redis) {
  return async (req, res, next) => {
    const key = `page:${req.originalUrl}`
    const hit = await redis.getBuffer(key)
    if (hit !== null) {
      res.set(HEADERS).send(hit)
      return
    }
    const send = res.send.bind(res)
    res.send = (body) => {
      redis.set(key, body, 'EX', 600)
      return send(body)
    }
    next()
  }
}

if (kind === 'node' || kind === 'node-zig') {
  const app = (req, res) => {
    res.writeHead(200, { ...HEADERS, 'content-length': String(PAGE.length) })
    res.end(PAGE)
  }
  const server = http.createServer(pages ? pages.handler(app) : app)
  server.listen(0, '127.0.0.1', () => listening(server))
} else if (kind.startsWith('express')) {
  const app = express()
  app.set('etag', false)
  if (kind === 'express-zig') app.use(pages.express())
  if (kind === 'express-apicache') app.use(apicache.middleware('10 minutes'))
  if (kind === 'express-redis') app.use(redisPages(new Redis(Number(redisPort), '127.0.0.1')))
  app.get('/page', (req, res) => res.set(HEADERS).send(PAGE))
  const server = app.listen(0, '127.0.0.1', () => listening(server))
} else if (kind.startsWith('fastify')) {
  const app = Fastify()
  if (kind === 'fastify-zig') await app.register(pages.fastify())
  app.get('/page', (req, reply) => reply.headers(HEADERS).send(PAGE))
  await app.listen({ port: 0, host: '127.0.0.1' })
  listening(app.server)
} else {
  throw new Error(`unknown kind ${kind}`)
}
