'use strict'
// The native addon built from crates/ziggurat-node, found where napi-rs packages put it:
// next to package.json in a checkout (`npm run build`), else in the platform package
// (`ziggurat-linux-x64-gnu`) that an installed `ziggurat` has as an optional dependency.

const { existsSync } = require('node:fs')
const { join } = require('node:path')

const triple = {
  'linux-x64': 'linux-x64-gnu',
  'linux-arm64': 'linux-arm64-gnu',
}[`${process.platform}-${process.arch}`]

function load() {
  if (!triple) {
    throw new Error(
      `ziggurat: no build for ${process.platform}-${process.arch}: the shared segment needs Linux (x64 or arm64)`,
    )
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
