'use strict'
// The msgpack codec (the cache option serializer: 'msgpack'): the bytes of
// a value that is not a counter, as the Python front end's
// serializer="msgpack" writes and reads them (msgpack.packb with
// use_bin_type=True, msgpack.unpackb with raw=False and
// strict_map_key=False), made here with the msgpackr package, an optional
// peer dependency loaded by the first cache that asks for it. The addon
// stores these bytes as they are and hands them back as they are.
//
// What msgpack holds beyond JSON data, and how each language reads it:
// - a Buffer/Uint8Array inside a value: bin (Python: bytes; read back as a Buffer);
// - a BigInt beyond the safe integers, up to 64 bits: an integer (Python:
//   int; read back as a BigInt);
// - a Date: the timestamp extension (Python: msgpack.Timestamp; read back as a Date);
// - NaN and ±Infinity: floats.
// A safe integer beyond 32 bits inside a value is written as a msgpack
// integer, as Python writes its ints (msgpackr alone would write a float64).
// Anything a read would give back as something else (a Map: an object; a
// BigInt within the safe integers: a number; a Set: an array; a class
// instance: a plain object), or that msgpackr writes as an extension Python
// cannot read (undefined, functions), and symbols, invalid Dates, lone
// surrogates and cycles are refused: this process's L1 keeps the object
// written, which must be what every other reader gets.

/** The msgpackr version this package is tested with (its peer dependency). */
const VERSION = '2.1.4'

let packr = null

/**
 * Loads msgpackr once; throws naming `method`, the option and the install
 * command when it is not installed.
 *
 * @example
 * load('new Cache()')
 */
function load(method) {
  if (packr !== null) return
  let Packr
  try {
    ;({ Packr } = require('msgpackr'))
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e
    throw new Error(
      `${method}: serializer: 'msgpack' needs the msgpackr package, which is not installed: ` +
        `npm install msgpackr@${VERSION} (or leave serializer at 'auto')`,
    )
  }
  packr = new Packr({
    // Plain msgpack, as Python's msgpack package writes and reads it: no
    // record extension, maps read as objects, 64-bit integers read as a
    // number when it is exact, else a BigInt.
    useRecords: false,
    mapsAsObjects: true,
    int64AsType: 'auto',
    // A Buffer read from bin is its own bytes, not a view of what was read
    // (which copy: 'decode' keeps and decodes again).
    copyBuffers: true,
  })
}

const I64_MIN = -(2n ** 63n)
const U64_MAX = 2n ** 64n - 1n
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

function refuse(method, what) {
  throw new TypeError(
    `${method}: cannot store ${what} with serializer 'msgpack': values are JSON data, Buffers, ` +
      'Dates and BigInts of 64 bits',
  )
}

function describe(v) {
  if (v === undefined) return 'undefined'
  if (typeof v === 'function') return 'a function'
  if (typeof v === 'symbol') return 'a symbol'
  if (v instanceof Set) return 'a Set (store [...set])'
  if (v instanceof Map) return 'a Map (store Object.fromEntries(map))'
  return `an instance of ${v?.constructor?.name ?? 'an unknown class'}`
}

/**
 * Throws unless msgpack writes `v` so that both languages read it back as
 * the module comment says; whether it holds a safe integer beyond 32 bits
 * (which `exact` rewrites).
 */
function check(v, method, seen, depth) {
  switch (typeof v) {
    case 'string':
      if (!v.isWellFormed()) refuse(method, 'a string with lone surrogates')
      return false
    case 'boolean':
      return false
    case 'number':
      return Number.isSafeInteger(v) && (v > 0xffffffff || v < -0x80000000)
    case 'bigint':
      if (v < I64_MIN || v > U64_MAX) {
        throw new RangeError(`${method}: a BigInt inside a value must be from -2^63 to 2^64 - 1`)
      }
      if (v >= -MAX_SAFE && v <= MAX_SAFE) {
        throw new RangeError(
          `${method}: a BigInt inside a value must be beyond ±(2^53 - 1) (a read gives a smaller one back as a number): store Number(n)`,
        )
      }
      return false
    case 'object':
      break
    default:
      return refuse(method, describe(v))
  }
  if (v === null || v instanceof Uint8Array) return false
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) refuse(method, 'an invalid Date')
    return false
  }
  if (depth > 128) refuse(method, 'data nested more than 128 levels deep')
  if (seen.has(v)) refuse(method, 'a value that contains itself')
  seen.add(v)
  let wide = false
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) wide = check(v[i], method, seen, depth + 1) || wide
  } else {
    const proto = Object.getPrototypeOf(v)
    if (proto !== Object.prototype && proto !== null) refuse(method, describe(v))
    for (const k in v) wide = check(v[k], method, seen, depth + 1) || wide
  }
  seen.delete(v)
  return wide
}

/** A copy of `v` (checked) whose safe integers beyond 32 bits are BigInts, which msgpackr writes as integers. */
function exact(v) {
  if (typeof v === 'number') return Number.isSafeInteger(v) && (v > 0xffffffff || v < -0x80000000) ? BigInt(v) : v
  if (v === null || typeof v !== 'object' || v instanceof Uint8Array || v instanceof Date) return v
  if (Array.isArray(v)) return v.map(exact)
  const out = {}
  for (const k in v) out[k] = exact(v[k])
  return out
}

/**
 * The msgpack bytes of `value` (not a counter), checked.
 *
 * @example
 * load('new Cache()'); pack({ a: [1, 2.5] }, 'Cache.set()') // <Buffer de 00 01 a1 61 92 01 cb ...>
 */
function pack(value, method) {
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') {
    refuse(method, describe(value))
  }
  const wide = check(value, method, new Set(), 0)
  return packr.pack(wide ? exact(value) : value)
}

/**
 * The value in msgpack bytes `b`; undefined when they are not msgpack this codec reads.
 *
 * @example
 * unpack(Buffer.from('92 01 02'.replaceAll(' ', ''), 'hex')) // [1, 2]
 */
function unpack(b) {
  if (packr === null) return undefined
  try {
    return packr.unpack(b)
  } catch {
    return undefined
  }
}

module.exports = { load, pack, unpack, VERSION }
