// PM2 cluster mode: the instances PM2 forks attach to one cache by name,
// with no broker, and load a missing key once among them.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { test } from 'node:test'
import { Cache } from 'ziggurat'
import { cacheName } from './agents.mjs'

const run = promisify(execFile)
const here = dirname(fileURLToPath(import.meta.url))
const pm2 = join(dirname(createRequire(import.meta.url).resolve('pm2/package.json')), 'bin', 'pm2')
const INSTANCES = 3

test('PM2 cluster mode: instances share one cache and load a key once', async () => {
  const name = cacheName('pm2')
  // A PM2 home of the test's own: its daemon, logs and process list.
  const home = await mkdtemp(join(tmpdir(), 'ziggurat-pm2-'))
  const env = { ...process.env, PM2_HOME: home, ZIGGURAT_TEST_CACHE: name, INSTANCES: String(INSTANCES) }
  const c = new Cache(name, { size: '8MiB' })
  try {
    await run(process.execPath, [pm2, 'start', join(here, 'pm2-app.cjs'), '-i', String(INSTANCES), '--name', name], { env })
    let seen = []
    for (let i = 0; i < 600 && seen.length < INSTANCES; i++) {
      await new Promise((r) => setTimeout(r, 50))
      seen = Array.from({ length: INSTANCES }, (_, id) => c.get(`seen:${id}`)).filter((s) => s !== undefined)
    }
    const { stdout } = await run(process.execPath, [pm2, 'jlist'], { env })
    const apps = JSON.parse(stdout).filter((a) => a.name === name)
    assert.equal(apps.length, INSTANCES)
    for (const a of apps) assert.equal(a.pm2_env.exec_mode, 'cluster_mode')
    assert.equal(seen.length, INSTANCES, `every instance answered: ${JSON.stringify(seen)}`)
    assert.deepEqual(new Set(seen.map((s) => s.pid)), new Set(apps.map((a) => a.pid)))
    assert.equal(c.get('loads'), 1, 'one load among the instances')
    const by = seen[0].value.by
    for (const s of seen) assert.deepEqual(s.value, { by })
  } finally {
    await run(process.execPath, [pm2, 'kill'], { env }).catch(() => {})
    c.unlink()
    c.close()
    await rm(home, { recursive: true, force: true })
  }
})
