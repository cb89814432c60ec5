'use strict'
// Argument checks of the public methods: a TypeError for a wrong type, a
// RangeError for a value out of range, each naming the method and the
// argument, raised before anything is changed. Ranges the Cache defines
// (key length, TTLs, tags, sizes) are checked by the addon with the same
// rules as every front end.

const native = require('./native.cjs')
const { MAX_TAGS, MIN_TAG_BYTES } = require('./rules.cjs')

const durations = new Map()

function typeName(v) {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'object') return v.constructor?.name ?? 'an object'
  return typeof v
}

/** A key: a string without lone surrogates, or a Buffer/Uint8Array (as a Buffer). */
function key(k, method) {
  if (typeof k === 'string') {
    if (!k.isWellFormed()) {
      let i = 0
      while (i < k.length && k.slice(0, i + 1).isWellFormed()) i++
      throw new TypeError(
        `${method}: key is not valid UTF-8 (lone surrogate at index ${i}); pass it as a ` +
          'Buffer, encoded as the application chooses, or as a string without lone surrogates',
      )
    }
    return k
  }
  if (Buffer.isBuffer(k)) return k
  if (k instanceof Uint8Array) return Buffer.from(k.buffer, k.byteOffset, k.byteLength)
  throw new TypeError(`${method}: key must be a string or a Buffer/Uint8Array, not ${typeName(k)}`)
}

/** Seconds of a duration: a number of seconds, or a string such as '5m' ('ms', 's', 'm', 'h', 'd'). */
function duration(v, method, what) {
  if (typeof v !== 'number' && typeof v !== 'string') {
    throw new TypeError(
      `${method}: ${what} must be a number of seconds or a string such as '5m', not ${typeName(v)}`,
    )
  }
  // The rule is the Cache's (the addon's); each value is asked about once.
  let s = durations.get(v)
  if (s === undefined) {
    try {
      s = native.duration(v, what)
    } catch (e) {
      throw new RangeError(`${method}: ${e.message}`)
    }
    if (durations.size < 1000) durations.set(v, s)
  }
  return s
}

/** A duration that may be left out (undefined: the cache's). */
function optionalDuration(v, method, what) {
  return v === undefined ? undefined : duration(v, method, what)
}

/** A duration that may be turned off with null (undefined: the cache's). */
function nullableDuration(v, method, what) {
  if (v === undefined || v === null) return v
  return duration(v, method, what)
}

/** Tags: an array of non-empty strings (or one string). */
function tags(t, method) {
  if (t === undefined) return undefined
  const list = typeof t === 'string' ? [t] : t
  if (!Array.isArray(list)) {
    throw new TypeError(`${method}: tags must be an array of strings, not ${typeName(t)}`)
  }
  for (const x of list) {
    if (typeof x !== 'string') {
      throw new TypeError(`${method}: each tag must be a string, not ${typeName(x)}`)
    }
    if (x.length < MIN_TAG_BYTES) throw new RangeError(`${method}: a tag must not be empty`)
    if (!x.isWellFormed()) throw new TypeError(`${method}: a tag must be a string without lone surrogates`)
  }
  if (list.length > MAX_TAGS) {
    throw new RangeError(`${method}: at most ${MAX_TAGS} tags per entry, got ${list.length}`)
  }
  return list
}

/** An options object (undefined: none) whose keys are all in `allowed`. */
function options(o, method, allowed) {
  if (o === undefined) return {}
  if (o === null || typeof o !== 'object' || Array.isArray(o)) {
    throw new TypeError(`${method}: options must be an object, not ${typeName(o)}`)
  }
  for (const k of Object.keys(o)) {
    if (!allowed.includes(k)) {
      throw new TypeError(
        `${method}: unknown option ${JSON.stringify(k)}; the options are ${allowed.join(', ')}`,
      )
    }
  }
  return o
}

/** A size: a whole number of bytes or a string such as '256MiB'. */
function size(v, method, what) {
  if (v === undefined) return undefined
  if (typeof v === 'number') {
    if (!(Number.isSafeInteger(v) && v > 0)) {
      throw new RangeError(`${method}: ${what} must be a whole number of bytes > 0, got ${v}`)
    }
    return v
  }
  if (typeof v === 'string') {
    try {
      native.size(v)
    } catch (e) {
      throw new RangeError(`${method}: ${what}: ${e.message}`)
    }
    return v
  }
  throw new TypeError(
    `${method}: ${what} must be a number of bytes or a string such as '256MiB', not ${typeName(v)}`,
  )
}

/** An integer option within [min, max]. */
function integer(v, method, what, min, max) {
  if (typeof v !== 'number') throw new TypeError(`${method}: ${what} must be a number, not ${typeName(v)}`)
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${method}: ${what} must be an integer from ${min} to ${max}, got ${v}`)
  }
  return v
}

/** A number option within [0, 1) (the addon checks the range). */
function fraction(v, method, what) {
  // Its range is the Cache's rule, checked by the addon when the cache opens.
  if (typeof v !== 'number') throw new TypeError(`${method}: ${what} must be a number, not ${typeName(v)}`)
  return v
}

/** A string option. */
function string(v, method, what) {
  if (typeof v !== 'string') throw new TypeError(`${method}: ${what} must be a string, not ${typeName(v)}`)
  return v
}

/** A 64-bit integer argument as a BigInt. */
function int64(v, method, what) {
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`${method}: ${what} must be an integer, got ${v}`)
    return BigInt(v)
  }
  if (typeof v === 'bigint') {
    if (v < -(2n ** 63n) || v >= 2n ** 63n) {
      throw new RangeError(`${method}: ${what} must fit in a signed 64-bit integer`)
    }
    return v
  }
  throw new TypeError(`${method}: ${what} must be an integer (number or BigInt), not ${typeName(v)}`)
}

// The options each method accepts (a Namespace passes the same to its Cache).
const CACHE_OPTIONS = [
  'onWarning',
  'size',
  'negSize',
  'l1Items',
  'ttl',
  'negTtl',
  'staleTtl',
  'jitter',
  'loaderTimeout',
  'directory',
  'avgItemSize',
  'lockTimeout',
  'hugePages',
  'copy',
  'debug',
  'degraded',
  'degradedTtl',
  'serializer',
  'l1NegativeItems',
  'refreshAhead',
  'recreate',
  'group',
  'version',
  'redis',
  'secret',
  'redisTimeout',
  'streamLength',
  'clusterSingleFlight',
]
const SET_OPTIONS = ['ttl', 'tags']
const GET_OR_SET_OPTIONS = ['ttl', 'tags', 'negTtl', 'staleTtl']
const INCR_OPTIONS = ['default', 'tags']
const TOUCH_OPTIONS = ['ttl']

module.exports = {
  key,
  duration,
  optionalDuration,
  nullableDuration,
  tags,
  options,
  size,
  integer,
  fraction,
  string,
  int64,
  typeName,
  CACHE_OPTIONS,
  SET_OPTIONS,
  GET_OR_SET_OPTIONS,
  INCR_OPTIONS,
  TOUCH_OPTIONS,
}
