'use strict'
// The exceptions of the package, and the addon's errors translated into them
// with the public method's name in front of the message.

/** A failure of the cache itself (a damaged or refused segment, a lock timeout, a closed cache). */
class ZigguratError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = 'ZigguratError'
  }
}

/** A load of the key did not finish within `loaderTimeout`; the message names the key and the cache. */
class LoadTimeoutError extends ZigguratError {
  constructor(message, options) {
    super(message, options)
    this.name = 'LoadTimeoutError'
  }
}

// The addon words its errors in this package's names; its `code` says the
// class (crates/ziggurat-node/src/errors.rs: one napi status per class).
const CLASSES = {
  InvalidArg: RangeError,
  ObjectExpected: TypeError,
  Cancelled: LoadTimeoutError,
}

/**
 * The addon's error `e` as this package's exception, for `method`; `cache`:
 * the cache's name, which a load timeout names.
 */
function translate(e, method, cache) {
  if (!(e instanceof Error) || e instanceof TypeError || e instanceof RangeError) return e
  if (e instanceof ZigguratError) return e
  const Class = CLASSES[e.code] ?? ZigguratError
  const where = Class === LoadTimeoutError && cache !== undefined ? ` (cache ${JSON.stringify(cache)})` : ''
  return new Class(`${method}: ${e.message}${where}`, Class === ZigguratError ? { cause: e } : undefined)
}

/**
 * A cache's count of the writes its segment refused, for stats() and the
 * metrics: a refusal is a ZigguratError (a lock timeout, a damaged or full
 * segment), never bad input. A loaded value that getOrSet returned without
 * storing it is counted as a store failure as well.
 *
 * @example
 * const writes = new WriteErrors()
 * try { native.store(...) } catch (e) { throw writes.refused(e, 'Cache.set()') }
 */
class WriteErrors {
  errors = 0
  storeFailures = 0

  /** The addon's error `e` translated for `method`, counted if the segment refused a write. */
  refused(e, method) {
    const t = translate(e, method)
    if (t instanceof ZigguratError) this.errors++
    return t
  }

  /** A loaded value returned but not stored. */
  notStored() {
    this.errors++
    this.storeFailures++
  }
}

module.exports = { ZigguratError, LoadTimeoutError, WriteErrors, translate }
