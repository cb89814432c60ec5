'use strict'
// The addon built from crates/ziggurat-node (`npm run build` in a checkout).

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
  const file = join(__dirname, '..', `ziggurat.${triple}.node`)
  try {
    return require(file)
  } catch (e) {
    const err = new Error(
      `ziggurat: cannot load the native addon ${file} (${e.message}). In a checkout, build it ` +
        'with `make node-build` (or `npm run build` in node/), which needs a Rust toolchain',
    )
    err.cause = e
    throw err
  }
}

module.exports = load()
