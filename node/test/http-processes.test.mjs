// ziggurat/http across processes and languages: a page stored by a Python
// worker is served by a Node.js worker of the same site and the other way
// round, a purge through either clears both, one call of the app fills a URL
// for every process of the host, and a worker killed in the middle of a fill
// leaves nothing stale or stuck.
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { cacheName, removedAfter } from './agents.mjs'
import { request, server } from './http-helpers.mjs'

const names = removedAfter()
const started = []
after(async () => {
  for (const s of started) await s.kill()
})

const TOKEN = 'a-purge-token-of-16+'
const SITE = { host: 'site.test' }

async function start(lang, name, delay) {
  const s = await server(lang, name, delay)
  started.push(s)
  return s
}

function site() {
  const name = cacheName('http-x')
  names.push(name)
  return name
}

test('Python stores, Node.js serves; Node.js stores, Python serves; a purge through either clears both', async () => {
  const name = site()
  const py = await start('python', name)
  const js = await start('node', name)
  const fromPy = await request(py.port, '/py', { headers: SITE })
  assert.match(fromPy.body, /^python 1$/)
  const seenByJs = await request(js.port, '/py', { headers: SITE })
  assert.equal(seenByJs.body, fromPy.body)
  assert.match(seenByJs.headers['cache-status'], /^ziggurat; hit/)
  const fromJs = await request(js.port, '/js', { headers: SITE })
  assert.match(fromJs.body, /^node \d+ 1$/)
  const seenByPy = await request(py.port, '/js', { headers: SITE })
  assert.equal(seenByPy.body, fromJs.body)
  assert.match(seenByPy.headers['cache-status'], /^ziggurat; hit/)
  assert.deepEqual(py.calls, ['/py'])
  assert.deepEqual(js.calls, ['/js'])

  // A purge by URL through Node.js clears what Python stored.
  const purged = await request(js.port, '/py', { method: 'PURGE', headers: { ...SITE, 'purge-token': TOKEN } })
  assert.equal(purged.status, 200)
  assert.equal((await request(py.port, '/py', { headers: SITE })).body, 'python 2')
  // A purge by tag through Python clears what Node.js stored.
  const tags = await request(py.port, '/', { method: 'PURGE', headers: { ...SITE, 'purge-token': TOKEN, 'cache-tag': 'posts' } })
  assert.equal(tags.status, 200)
  assert.match((await request(js.port, '/js', { headers: SITE })).body, /^node \d+ 2$/)
})

test('one call of the app per URL for every process of the host', async () => {
  const name = site()
  const a = await start('node', name, 300)
  const b = await start('node', name, 300)
  const c = await start('python', name)
  const all = []
  for (let i = 0; i < 12; i++) all.push(request([a, b][i % 2].port, '/together', { headers: SITE }))
  const bodies = new Set((await Promise.all(all)).map((r) => r.body))
  assert.equal(bodies.size, 1)
  assert.equal(a.calls.length + b.calls.length, 1)
  assert.equal((await request(c.port, '/together', { headers: SITE })).body, [...bodies][0])
  assert.equal(c.calls.length, 0)
})

test('a worker killed in the middle of a fill leaves nothing stale or stuck', async () => {
  const name = site()
  const a = await start('node', name)
  const b = await start('node', name)
  // a's app takes 10 s for /slow/: it holds the fill's lease when it is killed.
  const pending = request(a.port, '/slow/page', { headers: SITE }).catch((e) => e)
  while (a.calls.length === 0) await new Promise((r) => setTimeout(r, 10))
  await a.kill('SIGKILL')
  assert.ok((await pending) instanceof Error)
  // b is not kept waiting on the dead fill: its app runs (it too takes 10 s for /slow/,
  // so ask for a page whose lease is free, then see /slow/ is not answered from a ghost).
  const t0 = Date.now()
  const other = await request(b.port, '/fresh', { headers: SITE })
  assert.match(other.body, /^node \d+ 1$/)
  assert.ok(Date.now() - t0 < 5000)
  const waits = request(b.port, '/slow/page', { headers: SITE }).catch(() => {})
  for (let i = 0; i < 300 && b.calls.length < 2; i++) await new Promise((r) => setTimeout(r, 20))
  assert.deepEqual(b.calls, ['/fresh', '/slow/page'])
  await b.kill('SIGKILL')
  await waits
})
