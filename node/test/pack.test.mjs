// What `npm pack` makes is what a user installs: packed here (the main package and the
// platform package with the prebuilt addon, as napi-rs lays them out), installed into a
// fresh project in a temporary directory with no Rust toolchain on the PATH, no registry
// and no access to the checkout, then used by several processes at once.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const pkgRoot = join(dirname(fileURLToPath(import.meta.url)), '..')
const checkout = realpathSync(join(pkgRoot, '..'))
const work = mkdtempSync(join(tmpdir(), 'ziggurat-packed-'))
const app = join(work, 'app')
const segments = join(work, 'segments')

// The PATH of a machine without Rust: every directory holding cargo or rustc left out.
const PATH = process.env.PATH.split(delimiter)
  .filter((d) => d && !existsSync(join(d, 'cargo')) && !existsSync(join(d, 'rustc')))
  .join(delimiter)
const env = {
  PATH,
  HOME: work,
  CARGO_HOME: join(work, 'no-cargo'),
  RUSTUP_HOME: join(work, 'no-rustup'),
  npm_config_cache: join(work, 'npm-cache'),
  npm_config_update_notifier: 'false',
}

function run(file, args, cwd) {
  const r = spawnSync(file, args, { cwd, env, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${file} ${args.join(' ')} failed (${r.status}): ${r.stderr}`)
  return r.stdout
}

let tarballs
before(() => {
  const out = join(work, 'tarballs')
  execFileSync(process.execPath, [join(pkgRoot, 'scripts', 'pack.mjs'), '--out', out], { encoding: 'utf8' })
  tarballs = readdirSync(out).map((f) => join(out, f))
  mkdirSync(app)
  mkdirSync(segments)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }))
})

after(() => rmSync(work, { recursive: true, force: true }))

test('the packed package installs offline with no Rust toolchain, the addon from its platform package', () => {
  const names = tarballs.map((t) => t.split('/').pop())
  // The arm64 addon is packed where its cross linker is installed (make node-pack).
  assert.deepEqual(
    names.filter((n) => !n.includes('arm64')).sort(),
    ['ziggurat-0.1.0.tgz', 'ziggurat-linux-x64-gnu-0.1.0.tgz', 'ziggurat-wasm32-wasi-0.1.0.tgz'],
  )
  for (const tool of ['cargo', 'rustc']) {
    assert.notEqual(spawnSync('sh', ['-c', `command -v ${tool}`], { env }).status, 0, `${tool} is on the PATH`)
  }
  // The packages of this machine's platform; the others are optional dependencies npm
  // skips here (as it skips the WebAssembly one on every Linux).
  const here = tarballs.filter((t) => !/arm64|wasm32/.test(t))
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', ...here], app)
  assert.ok(!existsSync(join(app, 'node_modules', 'ziggurat-wasm32-wasi')))
  const installed = join(app, 'node_modules', 'ziggurat')
  // A copy, not a link into the checkout.
  assert.ok(!realpathSync(installed).startsWith(checkout))
  assert.ok(existsSync(join(app, 'node_modules', 'ziggurat-linux-x64-gnu', 'ziggurat.linux-x64-gnu.node')))
  assert.deepEqual(readdirSync(installed).filter((f) => f.endsWith('.node')), [])
  for (const f of ['index.d.ts', 'index.d.cts', 'keyv.js', 'metrics.cjs', 'lib/degraded.cjs']) {
    assert.ok(existsSync(join(installed, f)), f)
  }
  assert.ok(!existsSync(join(installed, 'test')) && !existsSync(join(installed, 'scripts')))
  for (const dir of [installed, join(app, 'node_modules', 'ziggurat-linux-x64-gnu')]) {
    for (const f of ['LICENSE-MIT', 'LICENSE-APACHE']) assert.ok(existsSync(join(dir, f)), `${dir}: ${f}`)
  }
  // The addon ships without debug information.
  const addon = join(app, 'node_modules', 'ziggurat-linux-x64-gnu', 'ziggurat.linux-x64-gnu.node')
  const sections = execFileSync('readelf', ['-S', '-W', addon], { encoding: 'utf8' })
  assert.doesNotMatch(sections, /\.debug_info/)
})

test('processes of the installed package share one cache: one sets, one reads by require, one by import', () => {
  const name = `packed-${process.pid}`
  const options = JSON.stringify({ size: '8MiB', directory: segments })
  const setter = `import { Cache } from 'ziggurat'
const c = new Cache(${JSON.stringify(name)}, ${options})
c.set('greeting', { hello: 'world', n: 7 }, { tags: ['t'] })
c.incr('count', 5)
c.close()
console.log('set')`
  const cjs = `const { Cache } = require('ziggurat')
const c = new Cache(${JSON.stringify(name)}, ${options})
console.log(JSON.stringify([c.get('greeting'), c.incr('count')]))
c.close()`
  const esm = `import { Cache } from 'ziggurat'
const c = new Cache(${JSON.stringify(name)}, ${options})
console.log(JSON.stringify([c.get('greeting'), c.get('count')]))
c.unlink()
c.close()`
  assert.equal(run(process.execPath, ['--input-type=module', '-e', setter], app).trim(), 'set')
  assert.deepEqual(JSON.parse(run(process.execPath, ['-e', cjs], app)), [{ hello: 'world', n: 7 }, 6])
  assert.deepEqual(JSON.parse(run(process.execPath, ['--input-type=module', '-e', esm], app)), [
    { hello: 'world', n: 7 },
    6,
  ])
})

test('without its platform package the loader says what is missing', () => {
  const platform = join(app, 'node_modules', 'ziggurat-linux-x64-gnu')
  const away = join(work, 'away')
  renameSync(platform, away)
  try {
    const r = spawnSync(process.execPath, ['-e', "require('ziggurat')"], { cwd: app, env, encoding: 'utf8' })
    assert.notEqual(r.status, 0)
    assert.match(r.stderr, /cannot load the native addon for linux-x64-gnu/)
    assert.match(r.stderr, /ziggurat-linux-x64-gnu: not installed/)
    assert.match(r.stderr, /--omit=optional/)
  } finally {
    renameSync(away, platform)
  }
})
