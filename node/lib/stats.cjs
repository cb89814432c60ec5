'use strict'
// What Cache.stats() returns: this process's counters and the host segment's
// figures, with the same fields whether the cache has its segment or runs
// degraded (then the segment's figures are zero and the reason is given).

/**
 * The stats of a cache with its segment, from the addon's counts; `unread`
 * the values the package itself read as misses (`decodeErrors`, and
 * `foreign`: msgpack beyond plain data, beside those the addon counted).
 *
 * @example
 * segmentStats('blog', l1, native.counts(), { decodeErrors: 0, foreign: 0 }, writes, 'passthrough').l2.hits
 */
function segmentStats(name, l1, c, unread, writes, mode) {
  const host = {}
  for (const { name, value } of c.host) host[name] = value
  const negHost = {}
  for (const { name, value } of c.negHost) negHost[name] = value
  return {
    name,
    l1: {
      items: l1.size,
      maxItems: l1.max,
      negativeItems: l1.negativeSize,
      maxNegativeItems: l1.maxNegative,
      hits: l1.hits,
      misses: c.l1Misses,
      evictions: l1.evictions,
      staleDrops: l1.staleDrops,
    },
    l2: { hits: c.l2Hits, misses: c.l2Misses, staleReads: c.staleReads },
    negHits: c.negHits,
    foreign: c.foreign + unread.foreign,
    decodeErrors: unread.decodeErrors,
    writeErrors: writes.errors,
    storeFailures: writes.storeFailures,
    loads: c.loads,
    loadErrors: c.loadErrors,
    loadSeconds: c.loadSeconds,
    loadMaxSeconds: c.loadMaxSeconds,
    waits: c.waits,
    takeovers: c.takeovers,
    staleServed: c.staleServed,
    refreshes: c.refreshes,
    degraded: null,
    degradedCause: null,
    degradedMode: mode,
    host,
    negHost,
  }
}

/**
 * The stats of a degraded cache: its process-local store and loads.
 *
 * @example
 * degradedStats('blog', dg, writes, failure, 'local').degradedCause // 'missing_directory'
 */
function degradedStats(name, dg, writes, failure, mode) {
  return {
    name,
    l1: {
      items: dg.size,
      maxItems: dg.local ? dg.max : 0,
      negativeItems: 0,
      maxNegativeItems: 0,
      hits: dg.hits,
      misses: dg.misses,
      evictions: dg.evictions,
      staleDrops: 0,
    },
    l2: { hits: 0, misses: 0, staleReads: 0 },
    negHits: 0,
    foreign: 0,
    decodeErrors: 0,
    writeErrors: writes.errors,
    storeFailures: writes.storeFailures,
    loads: dg.loads,
    loadErrors: dg.loadErrors,
    loadSeconds: dg.loadSeconds,
    loadMaxSeconds: dg.loadMaxSeconds,
    waits: 0,
    takeovers: 0,
    staleServed: 0,
    refreshes: 0,
    degraded: failure.reason,
    degradedCause: failure.cause,
    degradedMode: mode,
    host: {},
    negHost: {},
  }
}

module.exports = { segmentStats, degradedStats }
