'use strict'
// Cache.memoize() and Namespace.memoize() (Python's Cache.cached): a
// function's results cached through getOrSet, keyed by the function's name and
// its arguments. The key rule is this package's own (Python's binds arguments
// to a signature, which JavaScript functions do not declare): the arguments as
// canonical JSON (object keys sorted), digested, so any number of arguments of
// any size makes a key within the Cache's limit, the same in every process and
// after a restart.

const { createHash } = require('node:crypto')
const args = require('./args.cjs')

const MEMOIZE_OPTIONS = ['name', 'key', 'ttl', 'tags', 'negTtl', 'staleTtl']

/** An argument that is not JSON data, with where it is and what it is. */
class NotJson extends Error {
  constructor(path, what) {
    super(`${path} is ${what}`)
    this.path = path
    this.what = what
  }
}

function article(name) {
  return /^[aeiou]/i.test(name) ? `an ${name}` : `a ${name}`
}

/**
 * `v` as canonical JSON: object keys sorted, so that `{a, b}` and `{b, a}` are
 * one key; throws NotJson for what JSON cannot say exactly (undefined,
 * functions, symbols, BigInts, NaN and Infinity, class instances, cycles).
 */
function canonical(v, path, seen) {
  if (v === null) return 'null'
  switch (typeof v) {
    case 'string':
      if (!v.isWellFormed()) throw new NotJson(path, 'a string with a lone surrogate')
      return JSON.stringify(v)
    case 'boolean':
      return v ? 'true' : 'false'
    case 'number':
      if (!Number.isFinite(v)) throw new NotJson(path, String(v))
      return JSON.stringify(v)
    case 'object': {
      if (seen.includes(v)) throw new NotJson(path, 'an object that contains itself')
      seen.push(v)
      let out
      if (Array.isArray(v)) {
        const parts = []
        for (let i = 0; i < v.length; i++) parts.push(canonical(v[i], `${path}[${i}]`, seen))
        out = `[${parts.join(',')}]`
      } else {
        const proto = Object.getPrototypeOf(v)
        if (proto !== Object.prototype && proto !== null) {
          throw new NotJson(path, article(v.constructor?.name ?? 'object'))
        }
        const keys = Object.keys(v).sort()
        const parts = keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k], `${path}.${k}`, seen)}`)
        out = `{${parts.join(',')}}`
      }
      seen.pop()
      return out
    }
    default:
      throw new NotJson(path, typeof v === 'undefined' ? 'undefined' : article(typeof v))
  }
}

/**
 * The key of a call of a memoized function named `name` with `list`:
 * `name:` and 32 hex digits of the SHA-256 of the arguments' canonical JSON.
 *
 * @example
 * callKey('user', [5]) // 'user:…' (the same for user(5) in every process)
 */
function callKey(name, list, M) {
  let text
  try {
    text = canonical(list, 'arguments', [])
  } catch (e) {
    if (!(e instanceof NotJson)) throw e
    const where = e.path.replace(/^arguments\[(\d+)\]/, 'argument $1')
    throw new TypeError(
      `${M}: cannot build a cache key for ${name}(): ${where} is ${e.what}, which is not JSON data; ` +
        'pass options.key, a function of the arguments returning the key',
    )
  }
  return `${name}:${createHash('sha256').update(text).digest('hex').slice(0, 32)}`
}

/**
 * `fn` with its results cached in `target` (a Cache or a Namespace) through
 * getOrSet; its errors name `M`.
 *
 * @example
 * const user = memoize(cache, async (id) => db.user(id), { ttl: '10m' }, 'Cache.memoize()')
 */
function memoize(target, fn, options, M) {
  if (typeof fn !== 'function') {
    throw new TypeError(`${M}: fn must be a function, not ${args.typeName(fn)}`)
  }
  const o = args.options(options, M, MEMOIZE_OPTIONS)
  const name = o.name === undefined ? fn.name : o.name
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(
      `${M}: name must be a non-empty string (the keys' prefix); an anonymous function needs options.name`,
    )
  }
  if (o.key !== undefined && typeof o.key !== 'function') {
    throw new TypeError(`${M}: key must be a function of the arguments returning a string, not ${args.typeName(o.key)}`)
  }
  const plan = {
    ttl: args.optionalDuration(o.ttl, M, 'ttl'),
    negTtl: args.nullableDuration(o.negTtl, M, 'negTtl'),
    staleTtl: args.nullableDuration(o.staleTtl, M, 'staleTtl'),
  }
  const tagsOf = typeof o.tags === 'function' ? o.tags : null
  const tags = tagsOf === null ? args.tags(o.tags, M) : undefined

  function keyOf(list) {
    if (o.key === undefined) return callKey(name, list, M)
    const k = o.key(...list)
    if (typeof k !== 'string') {
      throw new TypeError(`${M}: the key function returned ${args.typeName(k)}, not a string`)
    }
    return `${name}:${k}`
  }

  const memoized = async function (...list) {
    const key = keyOf(list)
    const t = tagsOf === null ? tags : args.tags(tagsOf(...list), M)
    return target.getOrSet(key, () => fn.apply(this, list), { ...plan, tags: t })
  }
  Object.defineProperty(memoized, 'name', { value: name })
  /** The cache key of a call with these arguments. */
  memoized.key = (...list) => keyOf(list)
  /** Removes the cached result of a call with these arguments; whether there was one. */
  memoized.invalidate = (...list) => target.delete(keyOf(list))
  return memoized
}

module.exports = { memoize, callKey, MEMOIZE_OPTIONS }
