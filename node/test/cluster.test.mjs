// A cache joined to the cluster tier by Python workers (redis=) is refused by
// Node.js, at open and, for a Node.js process opened before, at its next write:
// a write from here would reach this host only.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { Cache, ZigguratError } from 'ziggurat'
import { cacheName, python, redisServer } from './agents.mjs'

async function freePort() {
  const s = createServer()
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  await once(s, 'close')
  return port
}

const JOIN = `
import sys
from ziggurat import Cache
c = Cache(sys.argv[1], size="8MiB", redis=sys.argv[2], secret="s" * 32)
c.set("py", 1)
print("joined", flush=True)
sys.stdin.read()
c.unlink()
c.close()
`

test('a cache joined to the cluster tier by Python is refused, naming the reason', async (t) => {
  const dir = mkdtempSync('/tmp/zignode-redis-')
  const port = await freePort()
  const redis = spawn(redisServer(), ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  })
  t.after(() => {
    redis.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  const name = cacheName('cluster')
  const before = new Cache(name, { size: '8MiB' })
  before.set('node', 1)
  let py
  for (let attempt = 0; ; attempt++) {
    py = spawn(python(), ['-c', JOIN, name, `redis://127.0.0.1:${port}/0`], { stdio: ['pipe', 'pipe', 'inherit'] })
    const [line] = await once(createInterface({ input: py.stdout }), 'line')
    if (line === 'joined') break
    if (attempt > 20) throw new Error('the Python worker did not join')
  }
  try {
    const refused = (e) => e instanceof ZigguratError && /cluster tier/.test(e.message) && /Python workers/.test(e.message)
    assert.throws(() => new Cache(name, { size: '8MiB' }), refused)
    assert.throws(() => before.set('node', 2), refused)
    assert.throws(() => before.delete('node'), refused)
    assert.throws(() => before.clear(), refused)
  } finally {
    py.stdin.end()
    await once(py, 'exit')
    before.close()
  }
})

// Joins and does nothing else: with the server paused, the reader neither positions nor
// names the host, and stopping it gives its lease back, so only the join marker is left.
const JOIN_ONLY = `
import json, sys
from ziggurat import Cache
from ziggurat.cluster.tier import W
c = Cache(sys.argv[1], size="8MiB", redis=sys.argv[2], secret="s" * 32)
c._reader.stop()
print(json.dumps([c._tier.core.app_load(w) for w in (W.LEASE, W.SEQ, W.HOST, W.POSITIONED)]), flush=True)
sys.stdin.read()
c.unlink()
c.close()
`

test('a cache is refused as soon as a Python process joined the tier, before any write or connection', async (t) => {
  const dir = mkdtempSync('/tmp/zignode-redis-')
  const port = await freePort()
  const redis = spawn(redisServer(), ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  t.after(() => {
    redis.kill('SIGCONT')
    redis.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  for await (const line of createInterface({ input: redis.stdout })) {
    if (/Ready to accept connections/.test(line)) break
  }
  redis.kill('SIGSTOP')
  const name = cacheName('joined')
  const py = spawn(python(), ['-c', JOIN_ONLY, name, `redis://127.0.0.1:${port}/0`], { stdio: ['pipe', 'pipe', 'inherit'] })
  try {
    const [line] = await once(createInterface({ input: py.stdout }), 'line')
    // None of the words the tier sets in use is set: only the join marker says it joined.
    assert.deepEqual(JSON.parse(line), [0, 0, 0, 0])
    assert.throws(
      () => new Cache(name, { size: '8MiB' }),
      (e) => e instanceof ZigguratError && /cluster tier/.test(e.message),
    )
  } finally {
    redis.kill('SIGCONT')
    py.stdin.end()
    await once(py, 'exit')
  }
})
