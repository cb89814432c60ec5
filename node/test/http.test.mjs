// ziggurat/http's rules through node:http: hits, validation, Vary, HEAD,
// purges, unsafe methods, sizes, stale answers, and the settings refused.
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { HttpCache } from 'ziggurat/http'
import { opener } from './agents.mjs'
import { request, serve } from './http-helpers.mjs'

const cache = opener()
const TOKEN = 'a-purge-token-of-16+'
const servers = []
after(async () => {
  for (const s of servers) await s.close()
})

/** A server of `app` behind a new HttpCache (`options`); `{ port, pages, calls }`. */
async function site(app, options = {}) {
  const pages = new HttpCache(cache('http'), { purgeToken: TOKEN, ...options })
  const calls = []
  const s = await serve(
    pages.handler((req, res) => {
      calls.push({ url: req.url, headers: req.headers })
      return app(req, res, calls.length)
    }),
  )
  servers.push(s)
  return { port: s.port, pages, calls }
}

function page(res, n, headers = {}) {
  res.writeHead(200, { 'cache-control': 'max-age=60', 'content-type': 'text/plain', ...headers })
  res.end(`page ${n}`)
}

test('a response is stored once and served to every later request', async () => {
  const s = await site((req, res, n) => page(res, n, { 'content-length': String(`page ${n}`.length) }))
  const first = await request(s.port, '/a')
  assert.equal(first.body, 'page 1')
  assert.match(first.headers['cache-status'], /fwd=uri-miss; fwd-status=200; stored/)
  const second = await request(s.port, '/a')
  assert.equal(second.body, 'page 1')
  assert.match(second.headers['cache-status'], /^ziggurat; hit; ttl=\d+$/)
  assert.equal(second.headers['content-length'], '6')
  assert.equal(second.headers.age, '0')
  const head = await request(s.port, '/a', { method: 'HEAD' })
  assert.equal(head.body, '')
  assert.equal(head.headers['content-length'], '6')
  assert.equal(s.calls.length, 1)
})

test('a streamed response is relayed and stored at its end', async () => {
  const s = await site((req, res, n) => {
    res.setHeader('cache-control', 'max-age=60')
    res.write('part one, ')
    setTimeout(() => res.end(`part two ${n}`), 20)
  })
  const first = await request(s.port, '/s')
  assert.equal(first.body, 'part one, part two 1')
  assert.match(first.headers['cache-status'], /detail=streamed/)
  const second = await request(s.port, '/s')
  assert.equal(second.body, 'part one, part two 1')
  assert.match(second.headers['cache-status'], /hit/)
})

test('the tag header and this cache\'s own targeted field never leave', async () => {
  const s = await site((req, res, n) =>
    page(res, n, { 'cache-tag': 'posts', 'ziggurat-cache-control': 'max-age=30', 'cdn-cache-control': 'max-age=5' }),
  )
  for (const r of [await request(s.port, '/t'), await request(s.port, '/t')]) {
    assert.equal(r.headers['cache-tag'], undefined)
    assert.equal(r.headers['ziggurat-cache-control'], undefined)
    assert.equal(r.headers['cdn-cache-control'], 'max-age=5')
  }
  assert.match((await request(s.port, '/t')).headers['cache-status'], /ttl=(29|30)/)
})

test('validators: the client gets a 304 from the cache, and the app validates a stale response', async () => {
  let etag = '"v1"'
  const s = await site((req, res, n) => {
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, { etag, 'cache-control': 'max-age=60' })
      return res.end()
    }
    page(res, n, { etag, 'cache-control': 'max-age=1' })
  })
  await request(s.port, '/v')
  const nm = await request(s.port, '/v', { headers: { 'if-none-match': '"v1"' } })
  assert.equal(nm.status, 304)
  assert.equal(s.calls.length, 1)
  await new Promise((r) => setTimeout(r, 1100))
  // Stale: the app gets the stored validator, answers 304, and the stored body answers.
  const again = await request(s.port, '/v')
  assert.equal(again.status, 200)
  assert.equal(again.body, 'page 1')
  assert.equal(s.calls.length, 2)
  assert.equal(s.calls[1].headers['if-none-match'], '"v1"')
  assert.match((await request(s.port, '/v')).headers['cache-status'], /hit; ttl=(59|60)/)
  etag = '"v2"'
})

test('responses that vary are stored per variant', async () => {
  const s = await site((req, res, n) => page(res, `${n} ${req.headers.accept}`, { vary: 'Accept' }))
  const html = await request(s.port, '/x', { headers: { accept: 'text/html' } })
  const json = await request(s.port, '/x', { headers: { accept: 'application/json' } })
  assert.equal(html.body, 'page 1 text/html')
  assert.equal(json.body, 'page 2 application/json')
  assert.equal((await request(s.port, '/x', { headers: { accept: 'text/html' } })).body, 'page 1 text/html')
  assert.equal((await request(s.port, '/x', { headers: { accept: 'application/json' } })).body, 'page 2 application/json')
  assert.equal(s.calls.length, 2)
})

test('PURGE by URL and by tags, with the token only', async () => {
  const s = await site((req, res, n) => page(res, n, { 'cache-tag': req.url === '/p1' ? 'posts post:1' : 'lists' }))
  await request(s.port, '/p1')
  await request(s.port, '/l')
  const denied = await request(s.port, '/p1', { method: 'PURGE', headers: { 'purge-token': 'not-the-token-at-all' } })
  assert.equal(denied.status, 403)
  const tags = await request(s.port, '/', { method: 'PURGE', headers: { 'purge-token': TOKEN, 'cache-tag': 'post:1' } })
  assert.equal(tags.status, 200)
  assert.equal((await request(s.port, '/p1')).body, 'page 3')
  assert.equal((await request(s.port, '/l')).body, 'page 2')
  const url = await request(s.port, '/l', { method: 'PURGE', headers: { 'purge-token': TOKEN } })
  assert.equal(url.status, 200)
  assert.equal((await request(s.port, '/l', { method: 'PURGE', headers: { 'purge-token': TOKEN } })).status, 404)
  assert.equal((await request(s.port, '/l')).body, 'page 4')
  // Neither PURGE nor its token reached the app.
  assert.ok(s.calls.every((c) => c.headers['purge-token'] === undefined))
  assert.equal(s.pages.purge(`http://127.0.0.1:${s.port}/l`), true)
  assert.equal(s.pages.purge(`http://127.0.0.1:${s.port}/l`), false)
})

test('HttpCache.purge and invalidateTags clear stored responses', async () => {
  const s = await site((req, res, n) => page(res, n, { 'cache-tag': 'home' }), { allowedHosts: ['site.test'] })
  const h = { host: 'site.test' }
  await request(s.port, '/', { headers: h })
  assert.equal((await request(s.port, '/', { headers: h })).body, 'page 1')
  assert.equal(s.pages.purge('http://site.test/'), true)
  assert.equal((await request(s.port, '/', { headers: h })).body, 'page 2')
  s.pages.invalidateTags('home')
  assert.equal((await request(s.port, '/', { headers: h })).body, 'page 3')
  assert.throws(() => s.pages.purge('/relative'), /HttpCache.purge\(\): url must be an absolute http\(s\) URL/)
})

test('an unsafe method that succeeds invalidates its URL before the client sees the answer', async () => {
  const s = await site((req, res, n) => (req.method === 'POST' ? res.end('done') : page(res, n)))
  await request(s.port, '/c')
  const post = await request(s.port, '/c', { method: 'POST', body: 'x' })
  assert.match(post.headers['cache-status'], /fwd=method; detail=invalidates/)
  assert.equal((await request(s.port, '/c')).body, 'page 3')
})

test('a body larger than maxBody passes uncached', async () => {
  const s = await site((req, res) => {
    res.writeHead(200, { 'cache-control': 'max-age=60', 'content-length': '2000' })
    res.end('x'.repeat(2000))
  }, { maxBody: 1000 })
  const r = await request(s.port, '/big')
  assert.equal(r.body.length, 2000)
  assert.match(r.headers['cache-status'], /detail=too-large/)
  await request(s.port, '/big')
  assert.equal(s.calls.length, 2)
})

test('hosts not allowed and requests that would poison a key bypass the cache', async () => {
  const s = await site((req, res, n) => page(res, n))
  const evil = await request(s.port, '/', { headers: { host: 'evil.test' } })
  assert.match(evil.headers['cache-status'], /fwd=bypass; detail=host/)
  const fwd = await request(s.port, '/', { headers: { 'x-forwarded-host': 'evil.test' } })
  assert.match(fwd.headers['cache-status'], /fwd=bypass/)
  assert.equal(s.calls.length, 2)
})

test('private, no-store and Set-Cookie responses are not stored', async () => {
  const s = await site((req, res, n) => {
    const h = { '/private': { 'cache-control': 'private, max-age=60' }, '/nostore': { 'cache-control': 'no-store' }, '/cookie': { 'set-cookie': 'a=1' } }
    page(res, n, h[req.url])
  })
  for (const p of ['/private', '/nostore', '/cookie']) {
    const r = await request(s.port, p)
    assert.doesNotMatch(r.headers['cache-status'], /stored/, p)
    await request(s.port, p)
  }
  assert.equal(s.calls.length, 6)
})

test('stale-if-error: a failing app is answered with the stale response', async () => {
  const s = await site((req, res, n) => {
    if (n > 1) {
      res.writeHead(503)
      return res.end('down')
    }
    page(res, n, { 'cache-control': 'max-age=1, stale-if-error=60', 'content-length': '6' })
  })
  await request(s.port, '/e')
  await new Promise((r) => setTimeout(r, 1100))
  const r = await request(s.port, '/e')
  assert.equal(r.status, 200)
  assert.equal(r.body, 'page 1')
  assert.match(r.headers['cache-status'], /detail=stale-if-error/)
})

test('stale-while-revalidate answers at once and refreshes in the background', async () => {
  const s = await site((req, res, n) => page(res, n, { 'cache-control': 'max-age=1, stale-while-revalidate=30', 'content-length': '6' }))
  await request(s.port, '/w')
  await new Promise((r) => setTimeout(r, 1100))
  const r = await request(s.port, '/w')
  assert.equal(r.body, 'page 1')
  assert.match(r.headers['cache-status'], /stale-while-revalidate/)
  for (let i = 0; i < 50 && s.calls.length < 2; i++) await new Promise((r) => setTimeout(r, 20))
  assert.equal(s.calls.length, 2)
  await new Promise((r) => setTimeout(r, 50))
  assert.equal((await request(s.port, '/w')).body, 'page 2')
})

test('settings that cannot hold are refused, naming the setting', () => {
  const c = cache('http-options')
  assert.throws(() => new HttpCache(c, { maxBody: -1 }), { name: 'RangeError', message: /new HttpCache\(\): maxBody must be an integer/ })
  assert.throws(() => new HttpCache(c, { purgeToken: 'short' }), { name: 'RangeError', message: /purgeToken must be null \(PURGE off\) or a string of at least 16/ })
  assert.throws(() => new HttpCache(c, { keyHeaders: ['x_tenant'] }), { name: 'RangeError', message: /keyHeaders names a header with '_'/ })
  assert.throws(() => new HttpCache(c, { targetedFields: ['Cache-Control'] }), /Cache-Control itself is always read/)
  assert.throws(() => new HttpCache(c, { tagHeader: 'two words' }), /tagHeader must be a header name/)
  assert.throws(() => new HttpCache(c, { hitForMiss: 0 }), /hitForMiss must be a finite number of seconds > 0/)
  assert.throws(() => new HttpCache(c, { maxbody: 1 }), { name: 'TypeError', message: /unknown option\(s\) maxbody/ })
  assert.throws(() => new HttpCache({}, {}), /cache must be a ziggurat Cache/)
  const pages = new HttpCache(c, { tagHeader: ' Surrogate-Key ' })
  assert.equal(pages.options.tagHeader, 'surrogate-key')
  assert.equal(pages.options.maxBody, 1048576)
})

test('repeated header lines leave as they came, on a miss and on a hit', async () => {
  const s = await site((req, res, n) => {
    res.setHeader('x-before', 'set first') // a header set before writeHead, as frameworks do
    res.writeHead(200, ['Cache-Control', 'max-age=60', 'Link', '</a.css>; rel=preload', 'Link', '</b.js>; rel=preload'])
    res.end(`page ${n}`)
  })
  for (let i = 0; i < 2; i++) {
    const r = await request(s.port, '/links')
    assert.equal(r.headers.link, '</a.css>; rel=preload, </b.js>; rel=preload')
    assert.equal(r.headers['x-before'], 'set first')
  }
  assert.equal(s.calls.length, 1)
})

test('appTimeout: a slow app is answered stale at once, and its call is not stacked', async () => {
  const s = await site(
    (req, res, n) => {
      const answer = () => page(res, n, { 'cache-control': 'max-age=1', 'content-length': String(`page ${n}`.length) })
      if (n === 1) return answer()
      setTimeout(answer, 1500)
    },
    { appTimeout: 0.2, staleIfError: 60 },
  )
  await request(s.port, '/slow')
  await new Promise((r) => setTimeout(r, 1100))
  for (let i = 0; i < 5; i++) {
    const t0 = Date.now()
    const r = await request(s.port, '/slow')
    assert.equal(r.body, 'page 1')
    assert.ok(Date.now() - t0 < 1000, 'answered before the app')
    assert.match(r.headers['cache-status'], /stale-if-error/)
  }
  // One call of the app ran on behind the stale answers, not five.
  assert.equal(s.calls.length, 2)
  await new Promise((r) => setTimeout(r, 1600))
  // The call ended (what it wrote went nowhere): the next request calls the app again.
  assert.equal((await request(s.port, '/slow')).body, 'page 1')
  assert.equal(s.calls.length, 3)
})

test('on a degraded cache (no segment), responses are cached in this process and purges work', async () => {
  const c = cache('http-degraded', { directory: '/nonexistent/ziggurat', degraded: 'local', degradedTtl: 60, onWarning: () => {} })
  assert.equal(c.degraded, true)
  const pages = new HttpCache(c, { purgeToken: TOKEN })
  let n = 0
  const s = await serve(pages.handler((req, res) => page(res, ++n, { 'content-length': String(`page ${n}`.length) })))
  servers.push(s)
  assert.equal((await request(s.port, '/d')).body, 'page 1')
  assert.equal((await request(s.port, '/d')).body, 'page 1')
  // A degraded delete never says an entry was gone (other processes' are unknown): 404.
  assert.equal((await request(s.port, '/d', { method: 'PURGE', headers: { 'purge-token': TOKEN } })).status, 404)
  assert.equal((await request(s.port, '/d')).body, 'page 2')
})

test('a closed cache never fails a request: the app answers, uncached', async () => {
  const c = cache('http-closed')
  const pages = new HttpCache(c, { onWarning: () => {} })
  let n = 0
  const s = await serve(pages.handler((req, res) => page(res, ++n)))
  servers.push(s)
  c.close()
  const r = await request(s.port, '/x')
  assert.equal(r.status, 200)
  assert.equal(r.body, 'page 1')
  assert.equal((await request(s.port, '/x')).body, 'page 2')
})
