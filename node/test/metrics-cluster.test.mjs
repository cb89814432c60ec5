// Metrics gathered over `cluster` workers by prom-client's AggregatorRegistry: a host-wide
// figure (a segment's, ziggurat_up) appears once, whatever the number of workers; each
// worker's own counters keep their pid and add up.
import assert from 'node:assert/strict'
import cluster from 'node:cluster'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { AggregatorRegistry } from 'prom-client'
import { Cache } from 'ziggurat'
import { cacheName, removedAfter } from './agents.mjs'

const names = removedAfter()
const WORKERS = 3

/** The samples of `name` in `text` (Prometheus' text format) as [labels text, value]. */
function series(text, name) {
  const out = []
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line)
    if (m && m[1] === name) out.push([m[2], Number(m[3])])
  }
  return out
}

test('under cluster, host-wide figures appear once and per-process counters add up', async (t) => {
  const name = cacheName('metrics-cluster')
  names.push(name)
  const cache = new Cache(name, { size: '8MiB' })
  for (let i = 0; i < 10; i++) cache.set(`k${i}`, i)
  cluster.setupPrimary({ exec: fileURLToPath(new URL('./metrics-worker.mjs', import.meta.url)) })
  const workers = Array.from({ length: WORKERS }, () => cluster.fork({ ZIGGURAT_TEST_CACHE: name }))
  t.after(async () => {
    for (const w of workers) {
      w.disconnect()
      if (!w.isDead()) await once(w, 'exit')
    }
    cache.close()
  })
  await Promise.all(
    workers.map((w) =>
      Promise.race([
        once(w, 'message'),
        once(w, 'exit').then(([code]) => assert.fail(`a worker exited with ${code} before it was ready`)),
      ]),
    ),
  )
  const text = await new AggregatorRegistry().clusterMetrics()
  const host = cache.stats().host

  assert.deepEqual(series(text, 'ziggurat_up'), [[`cache="${name}"`, 1]])
  assert.deepEqual(series(text, 'ziggurat_entries').find(([l]) => l.includes('tier="l2"')), [
    `cache="${name}",tier="l2"`,
    10,
  ])
  const file = series(text, 'ziggurat_file_size_bytes').find(([l]) => l.includes('tier="l2"'))
  assert.equal(file[1], host.file_size)
  const sets = series(text, 'ziggurat_sets_total').find(([l]) => l.includes('tier="l2"'))
  assert.equal(sets[1], 10)

  // Each worker read its 10 keys from the segment, then from its own L1.
  const l1Hits = series(text, 'ziggurat_process_hits_total').filter(([l]) => l.includes('tier="l1"'))
  assert.equal(new Set(l1Hits.map(([l]) => /pid="(\d+)"/.exec(l)[1])).size, WORKERS)
  assert.equal(
    l1Hits.reduce((n, [, v]) => n + v, 0),
    10 * WORKERS,
  )
})
