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

/** Another caller's load of the key did not finish within `loaderTimeout`. */
class LoadTimeoutError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = 'LoadTimeoutError'
  }
}

// The Cache's messages name options as Python does; say them as this API does.
const NAMES = [
  [/\bneg_ttl\b/g, 'negTtl'],
  [/\bstale_ttl\b/g, 'staleTtl'],
  [/\bloader_timeout\b/g, 'loaderTimeout'],
  [/\brefresh_ahead\b/g, 'refreshAhead'],
  [/\block_timeout\b/g, 'lockTimeout'],
  [/\bhuge_pages\b/g, 'hugePages'],
  [/\bavg_item_size\b/g, 'avgItemSize'],
  [/\bmath\.inf\b/g, 'Infinity'],
  [/\bread_only=True\b/g, 'a read-only handle'],
]

function rename(message, names) {
  let m = message
  for (const [re, to] of names) m = m.replace(re, to)
  return m
}

/**
 * The addon's error `e` as this package's exception, for `method`; `argument`:
 * a [pattern, name] of an argument this method names otherwise.
 */
function translate(e, method, argument) {
  if (!(e instanceof Error) || e instanceof TypeError || e instanceof RangeError) return e
  if (e instanceof ZigguratError || e instanceof LoadTimeoutError) return e
  const message = `${method}: ${rename(e.message, argument === undefined ? NAMES : [argument, ...NAMES])}`
  switch (e.code) {
    case 'InvalidArg':
    case 'NumberExpected':
      return new RangeError(message)
    case 'ObjectExpected':
      return new TypeError(message)
    case 'Cancelled':
      return new LoadTimeoutError(message)
    default:
      return new ZigguratError(message, { cause: e })
  }
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
