'use strict'
// Values as the segment holds them, in the encoding the Python front end's
// serializer="auto" uses, so that each language reads what the other wrote:
//
// - a safe integer (|n| < 2^53) or a BigInt in the signed 64-bit range: a
//   native counter (Python: an int; `incr` changes it in place);
// - a Buffer/Uint8Array: the pickle CPython writes for a bytes object
//   (Python: bytes), made by the addon;
// - a string, and JSON data (objects of Object.prototype or null prototype,
//   arrays, strings, finite numbers, booleans, null): compact JSON text, the
//   bytes Python writes for the same str, dict or list. As JSON.stringify
//   writes it: an object with a toJSON method (a Date) as what that returns,
//   a property whose value is undefined left out, an undefined array item as
//   null. Every process then reads what JSON.parse gives (a Date as its ISO
//   string), this one too: its L1 keeps that form, not the object it wrote.
//
// What JSON would turn into something else unnoticed is a TypeError:
// functions, symbols, Map, Set, class instances without toJSON, NaN,
// Infinity, a BigInt inside an object, cycles (a Map would become {}).
//
// With the cache option serializer: 'msgpack' (Python's
// serializer="msgpack"), integers are counters all the same, as in Python,
// and every other value is its msgpack bytes (lib/msgpack.cjs), which the
// addon stores and returns as they are (RAW).

const msgpack = require('./msgpack.cjs')
const { CODES, MAX_DEPTH } = require('./rules.cjs')

const I64_MIN = -(2n ** 63n)
const I64_MAX = 2n ** 63n - 1n

/** Encoding codes shared with the addon. */
const { JSON_TEXT, BYTES, COUNTER, RAW } = CODES

function describe(v) {
  if (v === undefined) return 'undefined'
  if (typeof v === 'function') return 'a function'
  if (typeof v === 'symbol') return 'a symbol'
  if (typeof v === 'bigint') return 'a BigInt inside an object or array'
  if (typeof v === 'number') return String(v)
  if (v instanceof Map) return 'a Map (store Object.fromEntries(map))'
  if (v instanceof Set) return 'a Set (store [...set])'
  return `an instance of ${v?.constructor?.name ?? 'an unknown class'}`
}

function refuse(method, what) {
  throw new TypeError(
    `${method}: cannot store ${what}: values are JSON data (plain objects, arrays, strings, ` +
      'finite numbers, booleans, null), integers, BigInts of 64 bits, strings or Buffers',
  )
}

/**
 * Throws unless `v` is JSON data as JSON.stringify writes it (see the module
 * comment); returns whether JSON.parse of that text gives back something else
 * than `v` (a toJSON applied, an undefined left out or written as null).
 */
function checkPlain(v, method, seen, depth) {
  switch (typeof v) {
    case 'string':
      if (!v.isWellFormed()) refuse(method, 'a string with lone surrogates')
      return false
    case 'boolean':
      return false
    case 'number':
      if (!Number.isFinite(v)) refuse(method, describe(v))
      return false
    case 'object':
      break
    default:
      return refuse(method, describe(v))
  }
  if (v === null) return false
  if (depth > MAX_DEPTH) refuse(method, `data nested more than ${MAX_DEPTH} levels deep`)
  if (typeof v.toJSON === 'function') {
    checkPlain(v.toJSON(), method, seen, depth + 1)
    return true
  }
  if (seen.has(v)) refuse(method, 'a value that contains itself')
  seen.add(v)
  let changed = false
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      if (v[i] === undefined) changed = true
      else changed = checkPlain(v[i], method, seen, depth + 1) || changed
    }
  } else {
    const proto = Object.getPrototypeOf(v)
    if (proto !== Object.prototype && proto !== null) refuse(method, describe(v))
    for (const k in v) {
      if (v[k] === undefined) changed = true
      else changed = checkPlain(v[k], method, seen, depth + 1) || changed
    }
  }
  seen.delete(v)
  return changed
}

/**
 * How `value` is stored: [code, text, bytes, num, big] as the addon takes
 * them; `serializer` the cache's option ('auto' when not given).
 */
function encode(value, method, serializer) {
  if (serializer === 'msgpack') return encodeMsgpack(value, method)
  switch (typeof value) {
    case 'number':
      if (Number.isSafeInteger(value)) return [COUNTER, undefined, undefined, value, undefined]
      if (!Number.isFinite(value)) refuse(method, describe(value))
      return [JSON_TEXT, JSON.stringify(value)]
    case 'bigint':
      if (value < I64_MIN || value > I64_MAX) {
        throw new RangeError(`${method}: a BigInt value must fit in a signed 64-bit integer`)
      }
      return [COUNTER, undefined, undefined, undefined, value]
    case 'string':
      if (!value.isWellFormed()) refuse(method, 'a string with lone surrogates')
      return [JSON_TEXT, JSON.stringify(value)]
    case 'boolean':
      return [JSON_TEXT, value ? 'true' : 'false']
    case 'object':
      if (value instanceof Uint8Array) {
        const b = Buffer.isBuffer(value)
          ? value
          : Buffer.from(value.buffer, value.byteOffset, value.byteLength)
        return [BYTES, undefined, b]
      }
      if (checkPlain(value, method, new Set(), 0)) {
        const text = JSON.stringify(value)
        return [JSON_TEXT, text, undefined, undefined, undefined, JSON.parse(text)]
      }
      return [JSON_TEXT, JSON.stringify(value)]
    default:
      return refuse(method, describe(value))
  }
}

/**
 * What every process reads of `value` once stored as `enc` (what encode()
 * gave): `value` itself, or its JSON form when JSON changes it (a Date in it).
 *
 * @example
 * stored(encode({ at: new Date(0) }, 'Cache.set()', 'auto'), v) // { at: '1970-01-01T00:00:00.000Z' }
 */
function stored(enc, value) {
  return enc.length > 5 ? enc[5] : value
}

/** `encode` for serializer 'msgpack': a counter for an integer of 64 bits, else msgpack bytes. */
function encodeMsgpack(value, method) {
  if (typeof value === 'number' && Number.isSafeInteger(value)) {
    return [COUNTER, undefined, undefined, value, undefined]
  }
  if (typeof value === 'bigint') {
    if (value >= I64_MIN && value <= I64_MAX) return [COUNTER, undefined, undefined, undefined, value]
    // Beyond it, up to 2^64 - 1, a msgpack integer, as Python stores a larger int.
    if (value < I64_MIN || value > 2n ** 64n - 1n) {
      throw new RangeError(`${method}: a BigInt value must be from -2^63 to 2^64 - 1`)
    }
  }
  return [RAW, undefined, msgpack.pack(value, method)]
}

/**
 * The value the addon returned as `out`, of kind `code`; `undefined` for
 * text that is not JSON or bytes that are not msgpack, FOREIGN for msgpack
 * this package never writes (see lib/msgpack.cjs).
 */
function decode(out, code) {
  switch (code) {
    case JSON_TEXT:
      try {
        return JSON.parse(out)
      } catch {
        return undefined
      }
    case BYTES:
    case COUNTER:
      return out
    case RAW:
      return msgpack.unpack(out)
    default:
      return undefined
  }
}

// -- copy: 'decode' ---------------------------------------------------------
// A value that can change (an object, an array, a Buffer) is kept as its
// encoding, and every hit decodes it anew, so that no caller sees another's
// mutation; a number, BigInt, string, boolean or null is kept as it is.

/**
 * Whether copy: 'decode' keeps `value` as its encoding (it can change),
 * rather than as it is.
 *
 * @example
 * encoded({ a: 1 }) // true; encoded('text') // false
 */
function encoded(value) {
  return value !== null && typeof value === 'object'
}

/**
 * What copy: 'decode' keeps of a value whose encoding is `code` with `form`
 * (its JSON text, or its bytes): the bytes copied, as the caller keeps
 * its Buffer.
 *
 * @example
 * keptForm(BYTES, buf) // a copy of buf
 */
function keptForm(code, form) {
  return code === BYTES ? Buffer.from(form) : form
}

/**
 * The value a hit of copy: 'decode' returns: `form` (kept by keptForm())
 * decoded anew.
 *
 * @example
 * fresh(JSON_TEXT, '{"a":[1]}') // { a: [1] }, a new object each call
 */
function fresh(code, form) {
  switch (code) {
    case JSON_TEXT:
      return JSON.parse(form)
    case BYTES:
      return Buffer.from(form)
    case RAW:
      // Bytes this process wrote, or read and checked as it kept them.
      return msgpack.unpackKnown(form)
    default:
      return form
  }
}

/**
 * `value` decoded anew from its encoding (a caller's own copy of a value it
 * shares with another); `value` itself when it cannot change or be encoded.
 *
 * @example
 * again({ a: 1 }, 'auto') // { a: 1 }, not the same object
 */
function again(value, serializer) {
  if (!encoded(value)) return value
  let enc
  try {
    enc = encode(value, 'Cache.getOrSet()', serializer)
  } catch {
    return value
  }
  return fresh(enc[0], enc[1] ?? enc[2])
}

/** The cache option `serializer`, checked ('auto' when not given); loads msgpackr for 'msgpack'. */
function serializerOption(v, method) {
  if (v === undefined || v === 'auto') return 'auto'
  if (v === 'msgpack') {
    msgpack.load(method)
    return v
  }
  if (typeof v !== 'string') {
    throw new TypeError(`${method}: serializer must be 'auto' or 'msgpack', not ${v === null ? 'null' : typeof v}`)
  }
  throw new RangeError(`${method}: serializer must be 'auto' or 'msgpack', got ${JSON.stringify(v)}`)
}

const { FOREIGN } = msgpack

module.exports = { FOREIGN, encode, stored, decode, checkPlain, serializerOption, encoded, keptForm, fresh, again }
