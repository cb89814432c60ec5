'use strict'
// The native addon built from crates/ziggurat-node, found where napi-rs packages put it:
// next to package.json in a checkout (`npm run build`), else in the platform package
// (`ziggurat-linux-x64-gnu`) that an installed `ziggurat` has as an optional dependency.
//
// Off Linux the shared segment cannot run, and the same addon built for WebAssembly
// (`ziggurat-wasm32-wasi`, or wasm/ in a checkout: `npm run build:wasm`) is loaded
// instead: every rule of the package (options, keys, messages, HTTP) then runs as on
// Linux, and a cache opens degraded (cause `unsupported_platform`, by default caching
// in the process for `degradedTtl`), with one warning saying why. NAPI_RS_FORCE_WASI=1
// loads it on Linux too, as napi-rs packages do, to try that path.

const { existsSync } = require('node:fs')
const { join } = require('node:path')

const triple = {
  'linux-x64': 'linux-x64-gnu',
  'linux-arm64': 'linux-arm64-gnu',
}[`${process.platform}-${process.arch}`]

/** Requires `what`, keeping back Node.js's one-time notice that WASI is experimental. */
function quietly(what) {
  const emit = process.emitWarning
  process.emitWarning = function (warning, ...rest) {
    const type = typeof rest[0] === 'string' ? rest[0] : rest[0]?.type
    if (type === 'ExperimentalWarning' && /WASI/.test(String(warning?.message ?? warning))) return
    return emit.call(this, warning, ...rest)
  }
  try {
    return require(what)
  } finally {
    process.emitWarning = emit
  }
}

/** The WebAssembly build of the addon, or throws saying what was tried. */
function portable(why) {
  const local = join(__dirname, '..', 'wasm', 'ziggurat.wasi.cjs')
  const pkg = 'ziggurat-wasm32-wasi'
  const tried = []
  for (const what of existsSync(local) ? [local, pkg] : [pkg]) {
    try {
      return quietly(what)
    } catch (e) {
      tried.push(e.code === 'MODULE_NOT_FOUND' && what === pkg ? `${pkg}: not installed` : `${what}: ${e.message}`)
    }
  }
  const err = new Error(
    `ziggurat: ${why}, and its WebAssembly build, which runs the cache in each process there, ` +
      `did not load (${tried.join('; ')}). An installed package takes it from the optional ` +
      `dependency ${pkg}: install ziggurat without --omit=optional / --no-optional. In a ` +
      'checkout, build it with `npm run build:wasm` in node/',
  )
  err.code = 'ZIGGURAT_NO_ADDON'
  throw err
}

function load() {
  if (!triple) {
    return portable(`the shared segment needs Linux (x64 or arm64), and this is ${process.platform}-${process.arch}`)
  }
  if (['1', 'true'].includes(process.env.NAPI_RS_FORCE_WASI ?? '')) {
    return portable('NAPI_RS_FORCE_WASI asks for the WebAssembly build')
  }
  const local = join(__dirname, '..', `ziggurat.${triple}.node`)
  const pkg = `ziggurat-${triple}`
  const tried = []
  if (existsSync(local)) {
    try {
      return require(local)
    } catch (e) {
      tried.push(`${local}: ${e.message}`)
    }
  }
  try {
    return require(pkg)
  } catch (e) {
    // A missing platform package is the common case; any other failure is said as it is.
    tried.push(e.code === 'MODULE_NOT_FOUND' ? `${pkg}: not installed` : `${pkg}: ${e.message}`)
  }
  const err = new Error(
    `ziggurat: cannot load the native addon for ${triple} (${tried.join('; ')}). ` +
      `An installed package takes it from the optional dependency ${pkg}: install ` +
      `ziggurat without --omit=optional / --no-optional, on Linux ${process.arch} with glibc. ` +
      'In a checkout, build it with `make node-build` (or `npm run build` in node/), which needs a Rust toolchain',
  )
  err.code = 'ZIGGURAT_NO_ADDON'
  throw err
}

const addon = load()

/**
 * Takes the functions that give array buffers over mapped words and this
 * thread's blocks off `addon`'s exports and class, which any code loading
 * this file reaches, into a property that is not enumerated, `buffers`:
 * `words(nativeCache)` (once per cache), `meta()`, `input()` and `clock()`.
 * What a store through the buffers can do is bounded in the addon
 * (crates/ziggurat-node/src/words.rs); this keeps other code from coming
 * across them. Once per addon: this file may be loaded anew (a cleared
 * module cache) over an addon already taken from.
 */
function take(addon) {
  if (Object.hasOwn(addon, 'buffers')) return
  const words = addon.NativeCache.prototype.words
  const buffers = Object.freeze({
    words: (nc) => words.call(nc),
    meta: addon.metaBuffer,
    input: addon.inputBuffer,
    clock: addon.clockBuffer,
  })
  delete addon.NativeCache.prototype.words
  delete addon.metaBuffer
  delete addon.inputBuffer
  delete addon.clockBuffer
  Object.defineProperty(addon, 'buffers', { value: buffers })
}

take(addon)

module.exports = addon
