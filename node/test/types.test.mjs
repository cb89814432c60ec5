// The shipped types check the documented calls and refuse wrong ones (tsc --noEmit).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'

const here = dirname(fileURLToPath(import.meta.url))

test('tsc --noEmit accepts the documented calls and refuses wrong ones', () => {
  const tsc = join(here, '..', 'node_modules', 'typescript', 'bin', 'tsc')
  const r = spawnSync(process.execPath, [tsc, '--noEmit', '-p', join(here, 'types')], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stdout + r.stderr)
})
