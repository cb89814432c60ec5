// cluster.fork() workers racing to create one cache end on one cache: each
// attaches by name, and what one writes the others read.
import assert from 'node:assert/strict'
import cluster from 'node:cluster'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { Cache } from 'ziggurat'
import { cacheName } from './agents.mjs'

const WORKERS = 4

test('cluster.fork() workers racing to create a cache share one', async () => {
  const name = cacheName('fork')
  cluster.setupPrimary({ exec: join(dirname(fileURLToPath(import.meta.url)), 'fork-worker.mjs'), args: [name] })
  const workers = Array.from({ length: WORKERS }, () => cluster.fork())
  const seen = await Promise.all(workers.map(async (w) => (await once(w, 'message'))[0]))
  for (const w of workers) w.send('done')
  await Promise.all(workers.map((w) => once(w, 'exit')))
  const c = new Cache(name, { size: '8MiB' })
  try {
    assert.equal(c.get('joined'), WORKERS, 'every worker counted in one cache')
    const pids = workers.map((w) => w.process.pid).sort()
    for (const s of seen) assert.equal(typeof s.pid, 'number')
    assert.deepEqual(seen.map((s) => s.pid).sort(), pids)
    for (const pid of pids) assert.equal(c.get(`worker:${pid}`), pid)
  } finally {
    c.unlink()
    c.close()
  }
})
