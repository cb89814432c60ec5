// worker_threads: each thread of a process opens the cache and reads what
// the others write, each with its own meta words (what a call found).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'
import { Cache } from 'ziggurat'
import { cacheName } from './agents.mjs'

const BODY = `
const { workerData, parentPort } = require('node:worker_threads')
const { Cache } = require('ziggurat')
const c = new Cache(workerData.name, { size: '8MiB', l1Items: 0 })
const mine = workerData.kind
let bad = 0
for (let i = 0; i < 20000; i++) {
  const k = mine + (i % 50)
  c.set(k, mine === 'n' ? i : mine === 's' ? 'v' + i : { i })
  const v = c.get(k)
  const ok = mine === 'n' ? typeof v === 'number' : mine === 's' ? typeof v === 'string' : typeof v === 'object'
  if (!ok) bad++
}
c.close()
parentPort.postMessage(bad)
`

test('threads of one process each read their own results', async () => {
  const name = cacheName('threads')
  const main = new Cache(name, { size: '8MiB' })
  try {
    const kinds = ['n', 's', 'o']
    const bad = await Promise.all(
      kinds.map(
        (kind) =>
          new Promise((resolve, reject) => {
            const w = new Worker(BODY, { eval: true, workerData: { name, kind } })
            w.once('message', resolve)
            w.once('error', reject)
          }),
      ),
    )
    assert.deepEqual(bad, [0, 0, 0])
    assert.equal(typeof main.get('n1'), 'number')
    assert.equal(typeof main.get('s1'), 'string')
    assert.equal(typeof main.get('o1'), 'object')
  } finally {
    main.unlink()
    main.close()
  }
})
