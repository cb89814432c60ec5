// Node.js writers killed with SIGKILL at random points, again and again:
// every value read is one that was written whole, and nothing stays locked.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { Cache } from 'ziggurat'
import { cacheName } from './agents.mjs'
import { checked, valid } from './checked.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const KILLS = 25

test('kill -9 of writers in a loop: 0 bad values read, no lock or lease left behind', async () => {
  const name = cacheName('kill')
  const cache = new Cache(name, { size: '8MiB', loaderTimeout: 5 })
  let reads = 0
  let found = 0
  let bad = 0
  try {
    for (let round = 0; round < KILLS; round++) {
      const w = spawn(process.execPath, [join(here, 'writer.mjs'), name], { stdio: ['ignore', 'pipe', 'inherit'] })
      await once(w.stdout, 'data')
      const until = performance.now() + 20 + Math.random() * 60
      while (performance.now() < until) {
        for (let j = 0; j < 64; j++) {
          const k = `k${j}`
          const v = cache.get(k)
          reads++
          if (v === undefined) continue
          found++
          if (!valid(k, v)) bad++
        }
        await new Promise((r) => setImmediate(r))
      }
      w.kill('SIGKILL')
      await once(w, 'exit')
    }
    assert.equal(bad, 0, `${bad} bad values among ${found} read`)
    assert.ok(found > 0, 'the writers wrote values the reader saw')
    // Nothing stays locked: writes go through, and loads whose holder died are taken over.
    for (let j = 0; j < 64; j++) cache.set(`k${j}`, checked(`k${j}`, 1))
    for (let j = 0; j < 8; j++) {
      const v = await cache.getOrSet(`lease${j}`, () => checked('lease', j))
      assert.ok(valid('lease', v))
    }
    assert.deepEqual(cache.get('k5'), checked('k5', 1))
  } finally {
    cache.unlink()
    cache.close()
  }
  assert.ok(reads > 0)
})
