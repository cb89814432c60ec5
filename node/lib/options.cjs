'use strict'
// The options of `new Cache(name, options)`, checked once, before any file is
// opened: their types here, their ranges where the Cache's rules live (the
// addon checks `copy` here, and the TTLs, fractions, sizes, name and version
// when it opens the cache, by ziggurat-cache's rules).

const args = require('./args.cjs')
const native = require('./native.cjs')
const { ZigguratError, translate } = require('./errors.cjs')
const { serializerOption } = require('./values.cjs')
const { MODES } = require('./degraded.cjs')
const { DEFAULTS: D } = require('./rules.cjs')

const M = 'new Cache()'

/**
 * The options resolved: `open`, what the addon's constructor takes, and what
 * the package keeps (L1's bounds, copy and debug, the degraded mode, the
 * codec, the early refresh).
 *
 * @example
 * cacheOptions({ ttl: '5m' }).open.ttl // 300
 */
function cacheOptions(options) {
  const o = args.options(options, M, args.CACHE_OPTIONS)
  const l1Items = o.l1Items === undefined ? D.l1_items : args.integer(o.l1Items, M, 'l1Items', 0, 2 ** 31)
  const ttl = o.ttl === undefined ? D.ttl : args.duration(o.ttl, M, 'ttl')
  const negTtl = o.negTtl === undefined ? D.neg_ttl : args.nullableDuration(o.negTtl, M, 'negTtl')
  const staleTtl = args.nullableDuration(o.staleTtl, M, 'staleTtl') ?? null
  const jitter = o.jitter === undefined ? D.jitter : args.fraction(o.jitter, M, 'jitter')
  const loaderTimeout =
    o.loaderTimeout === undefined ? D.loader_timeout : args.duration(o.loaderTimeout, M, 'loaderTimeout')
  const size = args.size(o.size, M, 'size')
  const negSize = args.size(o.negSize, M, 'negSize')
  const directory = o.directory === undefined ? D.directory : args.string(o.directory, M, 'directory')
  const avgItemSize =
    o.avgItemSize === undefined ? D.avg_item_size : args.integer(o.avgItemSize, M, 'avgItemSize', 0, Number.MAX_SAFE_INTEGER)
  if (o.lockTimeout !== undefined && typeof o.lockTimeout !== 'number') {
    throw new TypeError(`${M}: lockTimeout must be a number of seconds, not ${args.typeName(o.lockTimeout)}`)
  }
  const hugePages = o.hugePages === undefined ? D.huge_pages : args.string(o.hugePages, M, 'hugePages')
  const copy = o.copy === undefined ? D.copy : args.string(o.copy, M, 'copy')
  try {
    native.checkCopy(copy)
  } catch (e) {
    throw translate(e, M)
  }
  if (o.debug !== undefined && typeof o.debug !== 'boolean') {
    throw new TypeError(`${M}: debug must be true or false, not ${args.typeName(o.debug)}`)
  }
  const mode = o.degraded === undefined ? D.degraded : args.string(o.degraded, M, 'degraded')
  if (!MODES.includes(mode)) {
    throw new RangeError(`${M}: degraded must be 'passthrough', 'local' or 'raise', got ${JSON.stringify(mode)}`)
  }
  const degradedTtl = o.degradedTtl === undefined ? D.degraded_ttl : args.duration(o.degradedTtl, M, 'degradedTtl')
  // The codec and the cached misses' bound.
  const serializer = serializerOption(o.serializer, M)
  const l1NegativeItems =
    o.l1NegativeItems === undefined
      ? Math.floor(l1Items / D.l1_negative_share)
      : args.integer(o.l1NegativeItems, M, 'l1NegativeItems', 0, 2 ** 31)
  const refreshAhead = o.refreshAhead === undefined ? D.refresh_ahead : args.fraction(o.refreshAhead, M, 'refreshAhead')
  if (o.recreate !== undefined && typeof o.recreate !== 'boolean') {
    throw new TypeError(`${M}: recreate must be true or false, not ${args.typeName(o.recreate)}`)
  }
  if (o.group !== undefined && typeof o.group !== 'string' && typeof o.group !== 'number') {
    throw new TypeError(`${M}: group must be a group name or a gid, not ${args.typeName(o.group)}`)
  }
  if (o.version !== undefined && typeof o.version !== 'string' && typeof o.version !== 'number') {
    throw new TypeError(`${M}: version must be a whole number or a string, not ${args.typeName(o.version)}`)
  }
  const tier = tierOptions(o)
  if (o.onWarning !== undefined && typeof o.onWarning !== 'function') {
    throw new TypeError(`${M}: onWarning must be a function, not ${args.typeName(o.onWarning)}`)
  }
  return {
    open: {
      size,
      negSize,
      directory,
      avgItemSize,
      lockTimeout: o.lockTimeout,
      hugePages,
      ttl,
      negTtl: negTtl ?? undefined,
      staleTtl: staleTtl ?? undefined,
      jitter,
      loaderTimeout,
      l1: l1Items > 0,
      rawValues: serializer === 'msgpack',
      refreshAhead,
      recreate: o.recreate,
      group: o.group,
      version: o.version,
      joining: tier !== null,
    },
    tier,
    l1Items,
    l1NegativeItems,
    ttl,
    loaderTimeout,
    copy,
    debug: o.debug === true,
    mode,
    // Unset, the mode may depend on why the segment cannot open (lib/degraded.cjs).
    modeChosen: o.degraded !== undefined,
    degradedTtl,
    serializer,
    refreshAhead,
    warn: warner(o.onWarning),
  }
}

/**
 * The cluster tier's options (`redis` and the ones that go with it),
 * checked for their types here and for their ranges by the tier's rules
 * (ziggurat-cluster) as the cache joins; null without `redis`.
 *
 * @example
 * tierOptions({ redis: 'redis://10.0.0.5:6379/0', secret: process.env.CACHE_SECRET }).timeout // 0.1
 */
function tierOptions(o) {
  if (o.redis === undefined) {
    for (const name of ['secret', 'redisTimeout', 'streamLength', 'clusterSingleFlight']) {
      if (o[name] !== undefined) throw new TypeError(`${M}: ${name} is only used with redis; give both or neither`)
    }
    return null
  }
  const urls = typeof o.redis === 'string' ? [o.redis] : o.redis
  if (!Array.isArray(urls) || urls.length === 0 || urls.some((u) => typeof u !== 'string')) {
    throw new TypeError(
      `${M}: redis must be a redis://, rediss:// or unix:// URL, or an array of the URLs of a Redis Cluster's nodes, ` +
        `not ${args.typeName(o.redis)}`,
    )
  }
  if (o.secret === undefined) {
    throw new TypeError(
      `${M}: secret is required with redis: every value and event in Redis is authenticated with it ` +
        '(give the same secret, at least 16 bytes, on every host)',
    )
  }
  const list = Array.isArray(o.secret) ? o.secret : [o.secret]
  if (list.length === 0 || list.some((s) => typeof s !== 'string' && !(s instanceof Uint8Array))) {
    throw new TypeError(
      `${M}: secret must be a string, a Buffer or a non-empty array of them (the first signs, all verify), ` +
        `not ${args.typeName(o.secret)}`,
    )
  }
  if (o.clusterSingleFlight !== undefined && typeof o.clusterSingleFlight !== 'boolean') {
    throw new TypeError(`${M}: clusterSingleFlight must be true or false, not ${args.typeName(o.clusterSingleFlight)}`)
  }
  if (o.streamLength !== undefined && typeof o.streamLength !== 'number') {
    throw new TypeError(`${M}: streamLength must be a number of entries, not ${args.typeName(o.streamLength)}`)
  }
  const tier = {
    urls,
    // An array names the seed nodes of a Redis Cluster (one URL in an array too).
    cluster: Array.isArray(o.redis),
    secrets: list.map((s) => Buffer.from(s)),
    timeout: o.redisTimeout === undefined ? D.redis_timeout : args.duration(o.redisTimeout, M, 'redisTimeout'),
    streamLength: o.streamLength ?? D.stream_length,
    singleFlight: o.clusterSingleFlight === true,
  }
  if (typeof native.checkTier !== 'function') {
    throw new ZigguratError(
      `${M}: redis is not available in the WebAssembly build of ziggurat (it has no sockets): ` +
        'run on Linux, where the native addon is used',
    )
  }
  try {
    native.checkTier(tier)
  } catch (e) {
    throw translate(e, M)
  }
  return tier
}

/**
 * How a cache warns: through the app's `onWarning` (an Error named
 * ZigguratWarning, as a process 'warning' listener gets), else with
 * process.emitWarning. A warning never breaks the call that gives it: if
 * onWarning throws, the warning goes to the process instead.
 *
 * @example
 * warner((w) => logger.warn(w))('cache "blog": ...')
 */
function warner(onWarning) {
  const emit = (message) => process.emitWarning(message, 'ZigguratWarning')
  if (onWarning === undefined) return emit
  return (message) => {
    const warning = new Error(message)
    warning.name = 'ZigguratWarning'
    try {
      onWarning(warning)
    } catch {
      emit(message)
    }
  }
}

module.exports = { cacheOptions, warner }
