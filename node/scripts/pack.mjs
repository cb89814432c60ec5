// Packs what a user installs, in the layout of napi-rs packages: the `ziggurat` tarball
// (JavaScript and types, the platform packages listed as optional dependencies, as
// `napi prepublish` lists them) and one tarball per platform built here, from npm/<platform>/:
// `ziggurat-linux-x64-gnu` and `ziggurat-linux-arm64-gnu` with their prebuilt addons, and
// `ziggurat-wasm32-wasi` with the WebAssembly build that runs off Linux. The addon must be
// built first (`make node-build`; `make node-pack` builds the others it can).
// Usage: node scripts/pack.mjs [--out DIR] (default: dist/).

import { execFileSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const at = process.argv.indexOf('--out')
const out = resolve(at > 0 ? process.argv[at + 1] : join(root, 'dist'))
mkdirSync(out, { recursive: true })

// The licence texts of the repository's root ship in every tarball.
const LICENCES = ['LICENSE-MIT', 'LICENSE-APACHE']
function copyLicences(dir) {
  for (const f of LICENCES) copyFileSync(join(root, '..', f), join(dir, f))
}

const main = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const platforms = readdirSync(join(root, 'npm'))
const optional = {}
const packed = []

function pack(dir) {
  const [info] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: dir, encoding: 'utf8' }),
  )
  packed.push(join(out, info.filename))
}

// What each platform package ships from the build: the addon (`make node-build`, and for
// arm64 `make node-arm64`, which needs a cross linker), or its WebAssembly build with the
// loader napi-rs generates beside it (`make node-wasm`). A platform not built here is left
// out, and said so; the host's own is required.
function built(platform) {
  if (platform === 'wasm32-wasi') {
    const dir = join(root, 'wasm')
    return ['ziggurat.wasi.cjs', 'wasi-worker.mjs', `${main.napi.binaryName}.wasm32-wasi.wasm`].map((f) => join(dir, f))
  }
  return [join(root, `${main.napi.binaryName}.${platform}.node`)]
}
const host = `${process.platform}-${process.arch}-gnu`

for (const platform of platforms) {
  const dir = join(root, 'npm', platform)
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  if (pkg.version !== main.version) {
    throw new Error(`npm/${platform}/package.json: version ${pkg.version} differs from the package's ${main.version}`)
  }
  const files = built(platform)
  const missing = files.filter((f) => !existsSync(f))
  if (missing.length > 0) {
    if (platform === host) {
      throw new Error(`${missing.join(', ')} is not built: run \`make node-build\` (or \`npm run build\` in node/) first`)
    }
    console.error(`${pkg.name}: not built here (${missing.join(', ')} missing), left out`)
    continue
  }
  for (const f of files) {
    const to = join(dir, f.split('/').pop())
    copyFileSync(f, to)
    // The build keeps debug information for profiling; users get the addon without it
    // (about a fifth of the size), symbols kept so that a crash report still names functions.
    if (to.endsWith('.node')) execFileSync(platform.includes('arm64') ? 'aarch64-linux-gnu-strip' : 'strip', ['--strip-debug', to])
  }
  copyLicences(dir)
  pack(dir)
  optional[pkg.name] = pkg.version
}

// The main package from a copy of its files, so that the checkout's package.json keeps no
// dependency on a platform package that only exists once packed.
const stage = mkdtempSync(join(tmpdir(), 'ziggurat-pack-'))
try {
  const { devDependencies, scripts, ...manifest } = main
  manifest.optionalDependencies = optional
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  copyLicences(stage)
  for (const name of ['README.md', ...main.files.filter((f) => !LICENCES.includes(f))]) {
    const cut = name.lastIndexOf('/')
    const [dir, glob] = name.includes('*') ? [name.slice(0, cut), name.slice(cut + 1)] : [null, null]
    if (dir) {
      const suffix = glob.replace('*', '')
      mkdirSync(join(stage, dir), { recursive: true })
      for (const f of readdirSync(join(root, dir))) {
        if (f.endsWith(suffix)) copyFileSync(join(root, dir, f), join(stage, dir, f))
      }
    } else if (existsSync(join(root, name))) {
      cpSync(join(root, name), join(stage, name))
    } else if (main.files.includes(name)) {
      throw new Error(`${name} is listed in package.json "files" but missing`)
    }
  }
  pack(stage)
} finally {
  rmSync(stage, { recursive: true, force: true })
}
for (const p of packed) console.log(p)
