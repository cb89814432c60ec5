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
// cannot read (functions), and symbols, invalid Dates, lone surrogates and
// cycles are refused: this process's L1 keeps the object written, which must
// be what every other reader gets. An undefined is written as JSON writes it:
// a property left out (read back as undefined all the same), an array item
// as null.
//
// Bytes read from the segment may come from any process that can write it,
// so a read accepts only what this codec and Python's msgpack write: plain
// msgpack (nil, booleans, integers, floats, strings, bin, arrays, maps) and
// the timestamp extension. msgpackr reads more (shared references and
// cycles, records, bundled strings, Set, RegExp, Error, typed arrays,
// undefined), none of which either language writes here, and a handful of
// bytes of shared references can stand for a tree far too large to walk or
// serialize. Such bytes, and any value msgpackr would build from them that is
// not a tree of plain data, read as a foreign value (a miss).

/** The msgpackr version this package is tested with (its peer dependency). */
const { MAX_DEPTH } = require('./rules.cjs')

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
    // Reference extensions throw rather than build shared objects (wire()
    // refuses them first; this holds should that ever let one through).
    structuredClone: false,
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
  if (depth > MAX_DEPTH) refuse(method, `data nested more than ${MAX_DEPTH} levels deep`)
  if (seen.has(v)) refuse(method, 'a value that contains itself')
  seen.add(v)
  // An undefined is written as JSON writes it (left out of an object, null in
  // an array): msgpack's own undefined is an extension Python cannot read.
  let wide = false
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      wide = v[i] === undefined || check(v[i], method, seen, depth + 1) || wide
    }
  } else {
    const proto = Object.getPrototypeOf(v)
    if (proto !== Object.prototype && proto !== null) refuse(method, describe(v))
    for (const k in v) wide = v[k] === undefined || check(v[k], method, seen, depth + 1) || wide
  }
  seen.delete(v)
  return wide
}

/**
 * A copy of `v` (checked) whose safe integers beyond 32 bits are BigInts, which msgpackr
 * writes as integers, and whose undefineds are written as JSON writes them.
 */
function exact(v) {
  if (typeof v === 'number') return Number.isSafeInteger(v) && (v > 0xffffffff || v < -0x80000000) ? BigInt(v) : v
  if (v === undefined) return null
  if (v === null || typeof v !== 'object' || v instanceof Uint8Array || v instanceof Date) return v
  if (Array.isArray(v)) return v.map(exact)
  const out = {}
  for (const k in v) if (v[k] !== undefined) out[k] = exact(v[k])
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

/** What `unpack` gives for bytes that are msgpack of a kind this codec never writes. */
const FOREIGN = Symbol('foreign msgpack')

/** wire(): plain msgpack. */
const PLAIN = 0
/** wire(): not msgpack at all (truncated, trailing bytes). */
const MALFORMED = 1
/** wire(): msgpack with an extension other than the timestamp. */
const EXTENSION = 2

const u16 = (b, at) => (b[at] << 8) | b[at + 1]
const u32 = (b, at) => b[at] * 0x1000000 + ((b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3])

/**
 * Whether `b` holds exactly one plain msgpack value (see the module
 * comment): PLAIN, MALFORMED or EXTENSION. One pass over the bytes that
 * counts the values still owed, so neither nesting nor declared lengths
 * cost more than the bytes themselves.
 *
 * @example
 * wire(Buffer.from('920102', 'hex')) // PLAIN
 */
function wire(b) {
  const n = b.length
  let at = 0
  let owed = 1
  while (owed > 0) {
    // Every value owed takes at least a byte: a count beyond the rest lies.
    if (owed > n - at) return MALFORMED
    const t = b[at++]
    owed--
    if (t < 0x80 || t >= 0xe0 || (t >= 0xc0 && t <= 0xc3 && t !== 0xc1)) continue
    let len = 0
    if (t < 0x90) {
      owed += 2 * (t & 0x0f)
      continue
    }
    if (t < 0xa0) {
      owed += t & 0x0f
      continue
    }
    if (t < 0xc0) {
      len = t & 0x1f
    } else {
      switch (t) {
        case 0xc1:
          // Never used by msgpack; msgpackr's bundled strings.
          return EXTENSION
        case 0xc4:
        case 0xd9:
          if (at + 1 > n) return MALFORMED
          len = b[at]
          at += 1
          break
        case 0xc5:
        case 0xda:
          if (at + 2 > n) return MALFORMED
          len = u16(b, at)
          at += 2
          break
        case 0xc6:
        case 0xdb:
          if (at + 4 > n) return MALFORMED
          len = u32(b, at)
          at += 4
          break
        case 0xca:
        case 0xce:
        case 0xd2:
          len = 4
          break
        case 0xcb:
        case 0xcf:
        case 0xd3:
          len = 8
          break
        case 0xcc:
        case 0xd0:
          len = 1
          break
        case 0xcd:
        case 0xd1:
          len = 2
          break
        case 0xdc:
        case 0xde:
          if (at + 2 > n) return MALFORMED
          owed += (t === 0xde ? 2 : 1) * u16(b, at)
          at += 2
          continue
        case 0xdd:
        case 0xdf:
          if (at + 4 > n) return MALFORMED
          owed += (t === 0xdf ? 2 : 1) * u32(b, at)
          at += 4
          continue
        default: {
          // The extensions: fixext 1 to 16 (0xd4-0xd8), ext 8/16/32 (0xc7-0xc9).
          let size
          if (t >= 0xd4) {
            size = 1 << (t - 0xd4)
          } else {
            const w = 1 << (t - 0xc7)
            if (at + w > n) return MALFORMED
            size = w === 1 ? b[at] : w === 2 ? u16(b, at) : u32(b, at)
            at += w
          }
          if (at + 1 > n) return MALFORMED
          // The timestamp (-1) in its three sizes, and nothing else.
          if (b[at] !== 0xff || (size !== 4 && size !== 8 && size !== 12)) return EXTENSION
          len = 1 + size
        }
      }
    }
    if (len > n - at) return MALFORMED
    at += len
  }
  return at === n ? PLAIN : MALFORMED
}

/**
 * Whether `v`, as msgpackr built it, is a tree of plain data: null,
 * booleans, numbers, BigInts, strings, Buffers, Dates, arrays and plain
 * objects, no object reached twice (so no cycle, and no shared branch that
 * a walk or JSON.stringify() would visit again and again). One pass with a
 * set of the objects seen.
 *
 * @example
 * plain({ a: [1, 'x'] }) // true; const x = [1]; plain([x, x]) // false
 */
function plain(v) {
  const seen = new Set()
  const todo = [v]
  while (todo.length > 0) {
    const x = todo.pop()
    switch (typeof x) {
      case 'string':
      case 'number':
      case 'boolean':
      case 'bigint':
        continue
      case 'object':
        break
      default:
        return false
    }
    if (x === null) continue
    if (seen.has(x)) return false
    seen.add(x)
    const proto = Object.getPrototypeOf(x)
    if (proto === Array.prototype) {
      for (let i = 0; i < x.length; i++) todo.push(x[i])
    } else if (proto === Object.prototype) {
      for (const k of Object.keys(x)) todo.push(x[k])
    } else if (proto !== Date.prototype && !Buffer.isBuffer(x)) {
      return false
    }
  }
  return true
}

/**
 * The value in msgpack bytes `b` read from the segment: undefined when they
 * are not msgpack, FOREIGN when they are msgpack of a kind this codec never
 * writes or would build anything but a tree of plain data.
 *
 * @example
 * unpack(Buffer.from('92 01 02'.replaceAll(' ', ''), 'hex')) // [1, 2]
 */
function unpack(b) {
  if (packr === null) return undefined
  const w = wire(b)
  if (w === MALFORMED) return undefined
  if (w === EXTENSION) return FOREIGN
  let v
  try {
    v = packr.unpack(b)
  } catch {
    return undefined
  }
  return plain(v) ? v : FOREIGN
}

/**
 * The value in msgpack bytes this process already read with `unpack` (or
 * wrote itself): decoded again without the checks.
 *
 * @example
 * unpackKnown(Buffer.from('9101', 'hex')) // [1]
 */
function unpackKnown(b) {
  if (packr === null) return undefined
  try {
    return packr.unpack(b)
  } catch {
    return undefined
  }
}

module.exports = { load, pack, unpack, unpackKnown, FOREIGN, VERSION }
