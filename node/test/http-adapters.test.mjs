// The adapters of ziggurat/http: Express middleware, a Fastify plugin and a
// WHATWG fetch handler give the same answers as the node:http wrapper.
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import express from 'express'
import Fastify from 'fastify'
import { HttpCache } from 'ziggurat/http'
import { opener } from './agents.mjs'
import { request, serve } from './http-helpers.mjs'

const cache = opener()
const closing = []
after(async () => {
  for (const c of closing) await c()
})

test('Express: routes after the middleware are cached, errors pass through Express', async () => {
  const pages = new HttpCache(cache('express'))
  const app = express()
  app.set('env', 'test') // no error log for the route that throws
  let calls = 0
  app.use(pages.express())
  app.get('/post/:id', (req, res) => {
    calls++
    res.set('Cache-Control', 'max-age=60').set('Cache-Tag', `post:${req.params.id}`).send(`post ${req.params.id} #${calls}`)
  })
  app.get('/boom', () => {
    throw new Error('boom')
  })
  const s = await serve(app)
  closing.push(s.close)
  const first = await request(s.port, '/post/1')
  assert.equal(first.body, 'post 1 #1')
  const second = await request(s.port, '/post/1')
  assert.equal(second.body, 'post 1 #1')
  assert.match(second.headers['cache-status'], /^ziggurat; hit/)
  assert.equal(second.headers['x-powered-by'], 'Express')
  assert.equal(second.headers['cache-tag'], undefined)
  assert.equal(calls, 1)
  const boom = await request(s.port, '/boom')
  assert.equal(boom.status, 500)
  // The client's validators are answered by the cache from the stored response.
  const nm = await request(s.port, '/post/1', { headers: { 'if-none-match': second.headers.etag } })
  assert.equal(nm.status, 304)
  pages.invalidateTags('post:1')
  assert.equal((await request(s.port, '/post/1')).body, 'post 1 #2')
})

test('Express: stale-while-revalidate refreshes through the app in the background', async () => {
  const pages = new HttpCache(cache('express-swr'))
  const app = express()
  let calls = 0
  app.use(pages.express())
  app.get('/', (req, res) => {
    calls++
    res.set('Cache-Control', 'max-age=1, stale-while-revalidate=30').send(`home #${calls}`)
  })
  const s = await serve(app)
  closing.push(s.close)
  await request(s.port, '/')
  await new Promise((r) => setTimeout(r, 1100))
  assert.equal((await request(s.port, '/')).body, 'home #1')
  for (let i = 0; i < 50 && calls < 2; i++) await new Promise((r) => setTimeout(r, 20))
  assert.equal(calls, 2)
  await new Promise((r) => setTimeout(r, 50))
  assert.equal((await request(s.port, '/')).body, 'home #2')
})

test('Fastify: every route behind the cache', async () => {
  const pages = new HttpCache(cache('fastify'))
  const app = Fastify()
  let calls = 0
  await app.register(pages.fastify())
  app.get('/item', async (req, reply) => {
    calls++
    reply.header('cache-control', 'max-age=60')
    return { item: calls }
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  closing.push(() => app.close())
  const port = app.server.address().port
  assert.equal((await request(port, '/item')).body, '{"item":1}')
  const hit = await request(port, '/item')
  assert.equal(hit.body, '{"item":1}')
  assert.match(hit.headers['cache-status'], /^ziggurat; hit/)
  assert.equal(hit.headers['content-type'], 'application/json; charset=utf-8')
  assert.equal(calls, 1)
})

test('fetch handlers: Request in, Response out, the same rules', async () => {
  const pages = new HttpCache(cache('fetch'), { purgeToken: 'a-purge-token-of-16+' })
  let calls = 0
  const handler = pages.fetch(async (request) => {
    calls++
    const url = new URL(request.url)
    if (url.pathname === '/stream') {
      const body = new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode('a '))
          c.enqueue(new TextEncoder().encode(`b ${calls}`))
          c.close()
        },
      })
      return new Response(body, { headers: { 'cache-control': 'max-age=60' } })
    }
    return new Response(`fetch ${calls}`, { headers: { 'cache-control': 'max-age=60', 'content-type': 'text/plain', 'content-length': String(`fetch ${calls}`.length) } })
  })
  const get = (path, init) => handler(new Request(`http://localhost${path}`, init))
  const first = await get('/f')
  assert.equal(await first.text(), 'fetch 1')
  const second = await get('/f')
  assert.equal(await second.text(), 'fetch 1')
  assert.match(second.headers.get('cache-status'), /^ziggurat; hit/)
  assert.equal(await (await get('/stream')).text(), 'a b 2')
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 5))
  const streamed = await get('/stream')
  assert.equal(await streamed.text(), 'a b 2')
  assert.match(streamed.headers.get('cache-status'), /^ziggurat; hit/)
  const head = await get('/f', { method: 'HEAD' })
  assert.equal(await head.text(), '')
  assert.equal(calls, 2)
  const purge = await handler(new Request('http://localhost/f', { method: 'PURGE', headers: { 'purge-token': 'a-purge-token-of-16+' } }), { remoteAddress: '127.0.0.1' })
  assert.equal(purge.status, 200)
  assert.equal(await (await get('/f')).text(), 'fetch 3')
})

test('Fastify: stale-while-revalidate refreshes through Fastify\'s router in the background', async () => {
  const pages = new HttpCache(cache('fastify-swr'))
  const app = Fastify()
  let calls = 0
  await app.register(pages.fastify())
  app.get('/', async (req, reply) => {
    calls++
    reply.header('cache-control', 'max-age=1, stale-while-revalidate=30')
    return `home #${calls}`
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  closing.push(() => app.close())
  const port = app.server.address().port
  await request(port, '/')
  await new Promise((r) => setTimeout(r, 1100))
  assert.equal((await request(port, '/')).body, 'home #1')
  for (let i = 0; i < 50 && calls < 2; i++) await new Promise((r) => setTimeout(r, 20))
  assert.equal(calls, 2)
  await new Promise((r) => setTimeout(r, 50))
  assert.equal((await request(port, '/')).body, 'home #2')
})
