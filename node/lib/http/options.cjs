'use strict'
// The settings of an HttpCache, checked once as it is made. Their defaults and
// the rules a value must keep beyond its type are ziggurat-http's (read from
// the addon once); the types are checked here, in JavaScript's words.

const native = require('../native.cjs')

const DEFAULTS = native.httpDefaults()

/** The settings an HttpCache takes, with their defaults. */
const KNOWN = {
  allowedHosts: DEFAULTS.allowedHosts,
  maxBody: DEFAULTS.maxBody,
  requestDirectives: true,
  tagHeader: DEFAULTS.tagHeader,
  cacheStatus: true,
  defaultTtl: null,
  heuristic: false,
  storeSetCookie: false,
  storeAuthMustRevalidate: false,
  bypassHeaders: DEFAULTS.bypassHeaders,
  bypassCookies: [],
  keyHeaders: [],
  hitForMiss: DEFAULTS.hitForMiss,
  revalidateKeep: DEFAULTS.revalidateKeep,
  purgeToken: null,
  purgeClients: DEFAULTS.purgeClients,
  targetedFields: DEFAULTS.targetedFields,
  targetedForward: DEFAULTS.targetedForward,
  staleIfError: null,
  appTimeout: null,
  surrogateControl: false,
}

const WHO = 'new HttpCache()'

function show(v) {
  if (typeof v === 'string') return JSON.stringify(v)
  if (typeof v === 'bigint') return `${v}n`
  if (v === null || typeof v !== 'object') return String(v)
  return Array.isArray(v) ? 'an array' : 'an object'
}

function names(name, v, lower) {
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) {
    throw new TypeError(`${WHO}: ${name} must be an array of strings, got ${show(v)}`)
  }
  return v.map((s) => (lower ? s.trim().toLowerCase() : s.trim()))
}

function flag(name, v) {
  if (typeof v !== 'boolean') throw new TypeError(`${WHO}: ${name} must be true or false, got ${show(v)}`)
  return v
}

function seconds(name, v, nullable) {
  if (v === null && nullable) return null
  if (typeof v !== 'number') {
    throw new TypeError(`${WHO}: ${name} must be a number of seconds${nullable ? ' or null' : ''}, got ${show(v)}`)
  }
  if (!(v > 0 && Number.isFinite(v))) {
    throw new RangeError(`${WHO}: ${name} must be a finite number of seconds > 0, got ${show(v)}`)
  }
  return v
}

/** Why ziggurat-http refuses the text `v` of a setting (0 tag header, 1 token, 2 key header, 3 targeted field). */
const SETTING = { tagHeader: 0, purgeToken: 1, keyHeaders: 2, targetedFields: 3, targetedForward: 3 }

function refuse(name, v) {
  const why = native.httpSettingProblem(SETTING[name], v)
  if (why === null) return
  const say = {
    header: `must be a header name, got ${show(v)}`,
    short: `must be null (PURGE off) or a string of at least ${DEFAULTS.minPurgeToken} characters`,
    underscore: `names a header with '_' (${show(v)}); requests with '_' in a header name bypass the cache: use the '-' spelling`,
    'cache-control': "names targeted fields (RFC 9213) such as 'CDN-Cache-Control'; Cache-Control itself is always read",
  }[why]
  throw new RangeError(`${WHO}: ${name} ${say}`)
}

/**
 * The settings `given` checked, with the defaults for those not given.
 *
 * @example
 * settings({ allowedHosts: ['example.com'] }).maxBody // 1048576
 */
function settings(given = {}) {
  if (given === null || typeof given !== 'object') {
    throw new TypeError(`${WHO}: options must be an object, got ${show(given)}`)
  }
  const unknown = Object.keys(given).filter((k) => !Object.hasOwn(KNOWN, k))
  if (unknown.length) {
    throw new TypeError(`${WHO}: unknown option(s) ${unknown.join(', ')}; known: ${Object.keys(KNOWN).join(', ')}`)
  }
  const o = { ...KNOWN }
  for (const [k, v] of Object.entries(given)) if (v !== undefined) o[k] = v
  for (const k of ['allowedHosts', 'bypassCookies', 'purgeClients']) o[k] = names(k, o[k], k === 'allowedHosts')
  for (const k of ['bypassHeaders', 'keyHeaders', 'targetedFields', 'targetedForward']) o[k] = names(k, o[k], true)
  for (const k of ['requestDirectives', 'cacheStatus', 'heuristic', 'storeSetCookie', 'storeAuthMustRevalidate', 'surrogateControl']) {
    flag(k, o[k])
  }
  if (!Number.isSafeInteger(o.maxBody) || o.maxBody < 0) {
    throw new RangeError(`${WHO}: maxBody must be an integer number of bytes >= 0, got ${show(o.maxBody)}`)
  }
  if (typeof o.tagHeader !== 'string') throw new TypeError(`${WHO}: tagHeader must be a header name, got ${show(o.tagHeader)}`)
  refuse('tagHeader', o.tagHeader)
  o.tagHeader = o.tagHeader.trim().toLowerCase()
  for (const k of ['defaultTtl', 'staleIfError', 'appTimeout']) o[k] = seconds(k, o[k], true)
  for (const k of ['hitForMiss', 'revalidateKeep']) o[k] = seconds(k, o[k], false)
  if (o.purgeToken !== null) {
    if (typeof o.purgeToken !== 'string') {
      throw new TypeError(`${WHO}: purgeToken must be null (PURGE off) or a string, got ${show(o.purgeToken)}`)
    }
    refuse('purgeToken', o.purgeToken)
  }
  for (const h of o.keyHeaders) refuse('keyHeaders', h)
  for (const f of o.targetedFields) refuse('targetedFields', f)
  for (const f of o.targetedForward) refuse('targetedForward', f)
  return Object.freeze(o)
}

/** The addon's rules object for checked settings `o`. */
function rules(o) {
  return new native.HttpRules({
    allowedHosts: o.allowedHosts,
    maxBody: o.maxBody,
    requestDirectives: o.requestDirectives,
    tagHeader: o.tagHeader,
    cacheStatus: o.cacheStatus,
    defaultTtl: o.defaultTtl ?? undefined,
    heuristic: o.heuristic,
    storeSetCookie: o.storeSetCookie,
    storeAuthMustRevalidate: o.storeAuthMustRevalidate,
    bypassHeaders: o.bypassHeaders,
    bypassCookies: o.bypassCookies,
    keyHeaders: o.keyHeaders,
    purgeToken: o.purgeToken ?? undefined,
    targetedFields: o.targetedFields,
    targetedForward: o.targetedForward,
    staleIfError: o.staleIfError ?? undefined,
    revalidateKeep: o.revalidateKeep,
    surrogateControl: o.surrogateControl,
  })
}

module.exports = { settings, rules, DEFAULTS, KNOWN }
