// ziggurat/next's handlers as Next.js calls them: the cacheHandler (ISR, fetch cache)
// and the 'use cache' handler, read by another process of the host.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { test } from 'node:test'
import { cacheName, removedAfter } from './agents.mjs'

const names = removedAfter()
const name = cacheName('next')
names.push(name)
process.env.ZIGGURAT_NEXT = JSON.stringify({ name, size: '16MiB' })
const { ZigguratCacheHandler, createUseCacheHandler, withZiggurat } = await import('ziggurat/next')

/** What another process's handler reads for `key` (JSON of the result's value). */
function readElsewhere(code) {
  const script = `const { ZigguratCacheHandler, createUseCacheHandler } = require('ziggurat/next');(async () => { ${code} })().then((v) => process.stdout.write(JSON.stringify(v ?? null)))`
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env }, encoding: 'utf8' }))
}

test('cacheHandler: a page set by one process is read by another; revalidateTag voids it for both', async () => {
  const h = new ZigguratCacheHandler({})
  const page = { kind: 'APP_PAGE', html: '<h1>v1</h1>', rscData: Buffer.from('rsc'), headers: { 'x-next-cache-tags': 'post:1,_N_T_/posts/1' }, status: 200, segmentData: new Map([['/a', Buffer.from('s')]]) }
  await h.set('/posts/1', page, { cacheControl: { revalidate: 3600, expire: 7200 } })
  const got = await h.get('/posts/1', { kind: 'APP_PAGE' })
  assert.equal(got.value.html, '<h1>v1</h1>')
  assert.ok(Buffer.isBuffer(got.value.rscData) && got.value.segmentData.get('/a').toString() === 's')
  assert.equal(readElsewhere(`return (await new ZigguratCacheHandler({}).get('/posts/1', { kind: 'APP_PAGE' })).value.html`), '<h1>v1</h1>')
  readElsewhere(`await new ZigguratCacheHandler({}).revalidateTag(['post:1'])`)
  assert.equal(await h.get('/posts/1', { kind: 'APP_PAGE' }), null)
})

test('cacheHandler: fetch entries honour their tags and the soft tags of the request', async () => {
  const h = new ZigguratCacheHandler({})
  const data = { kind: 'FETCH', data: { headers: {}, body: 'e30=', status: 200, url: 'http://x/' }, revalidate: 60 }
  await h.set('f1', data, { fetchCache: true, tags: ['posts'] })
  assert.ok(await h.get('f1', { kind: 'FETCH', tags: ['posts'], softTags: ['_N_T_/x'] }))
  await h.revalidateTag('_N_T_/x')
  assert.equal(await h.get('f1', { kind: 'FETCH', tags: ['posts'], softTags: ['_N_T_/x'] }), null)
})

test("'use cache': a set another process waits for, tags updated everywhere", async () => {
  const u = createUseCacheHandler()
  const bytes = new TextEncoder().encode('rendered')
  const entry = {
    value: new ReadableStream({ start: (c) => (c.enqueue(bytes), c.close()) }),
    tags: ['products'],
    stale: 60,
    timestamp: Date.now(),
    expire: 3600,
    revalidate: 900,
  }
  await u.set('k1', Promise.resolve(entry))
  const text = readElsewhere(`const e = await createUseCacheHandler().get('k1', []); return e && (await new Response(e.value).text())`)
  assert.equal(text, 'rendered')
  assert.equal(await u.getExpiration(['products']), 0)
  readElsewhere(`await createUseCacheHandler().updateTags(['products'])`)
  assert.equal(await u.get('k1', []), undefined)
  assert.ok((await u.getExpiration(['products'])) > 0)
})

test('withZiggurat sets both handlers and turns the per-instance memory cache off', () => {
  const c = withZiggurat({ reactStrictMode: true }, { name: 'site' })
  assert.equal(c.reactStrictMode, true)
  assert.match(c.cacheHandler, /next-handler\.cjs$/)
  assert.match(c.cacheHandlers.default, /next-use-cache\.cjs$/)
  assert.equal(c.cacheMaxMemorySize, 0)
  assert.throws(() => withZiggurat({}, { name: 7 }), /withZiggurat\(\): options.name must be a string/)
  process.env.ZIGGURAT_NEXT = JSON.stringify({ name, size: '16MiB' })
})

test('options the cache refuses never fail a request: every lookup misses, with one warning', () => {
  const script = `
    process.env.ZIGGURAT_NEXT = JSON.stringify({ name: 'bad', size: 100 })
    const warnings = []
    process.on('warning', (w) => warnings.push(w.message))
    const { ZigguratCacheHandler } = require('ziggurat/next')
    const h = new ZigguratCacheHandler({})
    ;(async () => {
      await h.set('/p', { kind: 'APP_PAGE', html: 'x' }, {})
      const got = await h.get('/p', { kind: 'APP_PAGE' })
      await new Promise((r) => setImmediate(r))
      process.stdout.write(JSON.stringify({ got, warnings }))
    })()`
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }))
  assert.equal(out.got, null)
  assert.ok(out.warnings.some((w) => /could not open/.test(w)), out.warnings)
})

test('a page of several MB is stored and read back whole (a 64 MiB segment takes 8 MiB)', () => {
  const big = cacheName('next-big')
  names.push(big)
  const script = `
    process.env.ZIGGURAT_NEXT = JSON.stringify({ name: ${JSON.stringify(big)}, size: '64MiB' })
    const { ZigguratCacheHandler } = require('ziggurat/next')
    const h = new ZigguratCacheHandler({})
    const html = 'x'.repeat(3 << 20)
    const rsc = Buffer.alloc(2 << 20, 7)
    ;(async () => {
      await h.set('/big', { kind: 'APP_PAGE', html, rscData: rsc, headers: {}, status: 200 }, {})
      const got = await h.get('/big', { kind: 'APP_PAGE' })
      process.stdout.write(JSON.stringify({ html: got.value.html.length, rsc: got.value.rscData.equals(rsc) }))
    })()`
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }))
  assert.deepEqual(out, { html: 3 << 20, rsc: true })
})

test('an entry past the largest value, or a cache without its directory, never fails a request: one warning each', () => {
  const big = cacheName('next-over')
  names.push(big)
  const script = `
    const warnings = []
    process.on('warning', (w) => warnings.push(w.message))
    const { ZigguratCacheHandler } = require('ziggurat/next')
    ;(async () => {
      process.env.ZIGGURAT_NEXT = JSON.stringify({ name: ${JSON.stringify(big)}, size: '64MiB' })
      let h = new ZigguratCacheHandler({})
      const html = 'x'.repeat(12 << 20)
      await h.set('/huge', { kind: 'APP_PAGE', html, headers: {}, status: 200 }, {})
      await h.set('/huge2', { kind: 'APP_PAGE', html, headers: {}, status: 200 }, {})
      const huge = await h.get('/huge', { kind: 'APP_PAGE' })
      await h.set('/small', { kind: 'APP_PAGE', html: 'ok', headers: {}, status: 200 }, {})
      const small = await h.get('/small', { kind: 'APP_PAGE' })
      await new Promise((r) => setImmediate(r))
      process.stdout.write(JSON.stringify({ huge, small: small?.value?.html ?? null, warnings }))
    })()`
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }))
  assert.equal(out.huge, null, 'a 12 MB entry in a 64 MiB segment is not stored: Next.js renders it')
  assert.equal(out.small, 'ok', 'the cache goes on storing what fits')
  assert.equal(out.warnings.filter((w) => /not stored/.test(w)).length, 1, out.warnings)

  const script2 = `
    process.env.ZIGGURAT_NEXT = JSON.stringify({ name: 'nodir', directory: '/nonexistent-ziggurat-dir' })
    const warnings = []
    process.on('warning', (w) => warnings.push(w.message))
    const { ZigguratCacheHandler } = require('ziggurat/next')
    const h = new ZigguratCacheHandler({})
    ;(async () => {
      await h.set('/p', { kind: 'APP_PAGE', html: 'x', headers: {}, status: 200 }, {})
      const got = await h.get('/p', { kind: 'APP_PAGE' })
      await h.revalidateTag(['t'])
      await new Promise((r) => setImmediate(r))
      process.stdout.write(JSON.stringify({ got, warnings }))
    })()`
  const out2 = JSON.parse(execFileSync(process.execPath, ['-e', script2], { encoding: 'utf8' }))
  assert.equal(out2.got, null)
  assert.equal(out2.warnings.length, 1, out2.warnings)
  assert.match(out2.warnings[0], /nonexistent-ziggurat-dir/)
})

test('a stale entry is made anew by one instance of the host: the others serve it until then', async () => {
  const h = new ZigguratCacheHandler({})
  const page = { kind: 'APP_PAGE', html: '<h1>v1</h1>', headers: {}, status: 200 }
  await h.set('/stale', page, { tags: ['s:1'], cacheControl: { revalidate: 3600, expire: 7200 } })
  await new Promise((r) => setTimeout(r, 5))
  // Next.js 16's profile: stale at once, expired an hour later.
  await h.revalidateTag(['s:1'], { expire: 3600 })
  const mine = await h.get('/stale', { kind: 'APP_PAGE' })
  const elsewhere = readElsewhere(`return (await new ZigguratCacheHandler({}).get('/stale', { kind: 'APP_PAGE' })).lastModified`)
  assert.equal(mine.lastModified, -1, 'this instance makes it anew')
  assert.ok(elsewhere > 0, 'another serves it as it is meanwhile')
  assert.equal(mine.value.html, '<h1>v1</h1>')
  // The new render lands: every instance reads it as fresh.
  await h.set('/stale', { ...page, html: '<h1>v2</h1>' }, { tags: ['s:1'], cacheControl: { revalidate: 3600, expire: 7200 } })
  const after = readElsewhere(`const e = await new ZigguratCacheHandler({}).get('/stale', { kind: 'APP_PAGE' }); return [e.lastModified > 0, e.value.html]`)
  assert.deepEqual(after, [true, '<h1>v2</h1>'])
})
