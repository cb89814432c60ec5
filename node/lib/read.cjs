'use strict'
// A read below L1 of a string key, the common read, kept lean. It goes
// through this thread's input block (see crates/ziggurat-node/src/words.rs):
// the cache's slot, the key's length and its UTF-8 are put there and
// readInput() is called without arguments, the cheapest call into the addon
// (a bare Node-API function, made once).

const native = require('./native.cjs')
const args = require('./args.cjs')
const { translate } = require('./errors.cjs')

const inputBuffer = native.buffers.input()
const inputWords = inputBuffer ? new Uint32Array(inputBuffer, 0, 2) : null
const inputKey = inputBuffer ? Buffer.from(inputBuffer, 8, 4096) : null
const readInput = native.readInputFunction()
// Keys of up to this many UTF-16 units fit the block's 4096 bytes of UTF-8.
const INPUT_CHARS = 1365

/**
 * Puts a key of up to 32 ASCII characters in the input block: its length in
 * bytes; -1 for any other key. Copied here, cheaper than Buffer's write (a
 * call into C++) for the short keys most reads have, and such a key needs no
 * check for lone surrogates.
 */
function putAscii(key) {
  const n = key.length
  if (n > 32) return -1
  for (let i = 0; i < n; i++) {
    const c = key.charCodeAt(i)
    if (c > 0x7f) return -1
    inputKey[i] = c
  }
  return n
}

/**
 * The addon's answer for the string `key` read below L1 in the cache whose
 * reader is `slot` (`nativeCache` for a key too long for the input block);
 * the meta words say what it is. args.key() is called only for the error of
 * a lone surrogate, which a short ASCII key cannot hold.
 *
 * @example
 * const out = readString(native, slot, 'post:1', 'get')
 */
function readString(nativeCache, slot, key, method) {
  let n = inputWords !== null ? putAscii(key) : -1
  if (n < 0 && !key.isWellFormed()) args.key(key, `Cache.${method}()`)
  try {
    if (n >= 0 || (inputWords !== null && key.length <= INPUT_CHARS)) {
      if (n < 0) n = inputKey.write(key)
      inputWords[0] = slot
      inputWords[1] = n
      return readInput()
    }
    return nativeCache.read(key)
  } catch (e) {
    throw translate(e, `Cache.${method}()`)
  }
}

module.exports = { readString }
