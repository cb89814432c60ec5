'use strict'
// ziggurat's metrics through prom-client, under the names and labels of the Python
// exporter (docs/metrics.md): the host-wide figures of the segments, which any one
// worker reads for the whole host, and this process's own counters (`pid` label).

const { Cache } = require('./cache.cjs')

const HOST = ['cache', 'tier']
const PROC = ['cache', 'pid', 'tier']
const BARE = ['cache', 'pid']

// [stats key of a segment, name, kind, help]: the segment figures, tier l2 (entries)
// and negative_l2 (cached misses and load leases).
const HOST_SPECS = [
  ['hits', 'ziggurat_hits_total', 'counter', 'Segment lookups by every process of the host that found a live record'],
  ['misses', 'ziggurat_misses_total', 'counter', 'Segment lookups by every process of the host that found no live record'],
  ['sets', 'ziggurat_sets_total', 'counter', 'Records written to the segment by every process of the host'],
  ['deletes', 'ziggurat_deletes_total', 'counter', 'Deletes that removed a live record, by every process of the host'],
  ['evictions', 'ziggurat_evictions_total', 'counter', 'Records removed to make room (index evictions included)'],
  ['expirations', 'ziggurat_expirations_total', 'counter', 'Expired records reclaimed'],
  ['promotions', 'ziggurat_promotions_total', 'counter', 'Records moved from the small (probation) ring to the main ring'],
  ['reinsertions', 'ziggurat_reinsertions_total', 'counter', 'Main-ring records read since their last pass, kept for another'],
  ['ghost_hits', 'ziggurat_ghost_hits_total', 'counter', 'Records written straight to the main ring because their key was recently evicted'],
  ['index_evictions', 'ziggurat_index_evictions_total', 'counter', 'Records dropped because their index bucket was full'],
  ['lock_repairs', 'ziggurat_lock_repairs_total', 'counter', 'Shard locks recovered from a writer that died holding them'],
  ['lock_timeouts', 'ziggurat_lock_timeouts_total', 'counter', 'Writes refused with LockTimeout'],
  ['shard_resets', 'ziggurat_shard_resets_total', 'counter', 'Shards emptied because they were found damaged'],
  ['tag_invalidations', 'ziggurat_tag_invalidations_total', 'counter', 'Tag versions raised (invalidateTags, Namespace.clear)'],
  ['clears', 'ziggurat_clears_total', 'counter', 'clear() calls'],
  ['entries', 'ziggurat_entries', 'gauge', 'Records the index points at now (expired ones until reclaimed)'],
  ['bytes_used', 'ziggurat_memory_used_bytes', 'gauge', 'Bytes of the rings holding records, reclaimable ones included'],
  ['bytes_capacity', 'ziggurat_memory_capacity_bytes', 'gauge', 'Bytes of the rings: what records can occupy'],
  ['file_size', 'ziggurat_file_size_bytes', 'gauge', "The segment file's size"],
  ['max_value_size', 'ziggurat_max_value_size_bytes', 'gauge', 'The largest value the segment stores (the serialized value plus 13 bytes)'],
  ['shards', 'ziggurat_shards', 'gauge', 'Shards of the segment, each with its own writer lock'],
  ['index_slots', 'ziggurat_index_slots', 'gauge', "Slots of the segment's index, all shards"],
]

// [name, kind, labels, help, (stats, pid) => [[labels, value], ...]]: this process's own.
const PROC_SPECS = [
  ['ziggurat_process_hits_total', 'counter', PROC, 'Lookups this process answered, by tier', (s, at) => [
    [at('l1'), s.l1.hits],
    [at('l2'), s.l2.hits],
    [at('negative_l2'), s.negHits],
  ]],
  ['ziggurat_process_misses_total', 'counter', PROC, "Lookups this process's tier did not answer", (s, at) => [
    [at('l1'), s.l1.misses],
    [at('l2'), s.l2.misses],
  ]],
  ['ziggurat_process_entries', 'gauge', PROC, "Entries held in this process's L1", (s, at) => [[at('l1'), s.l1.items]]],
  ['ziggurat_process_decode_errors_total', 'counter', BARE, 'Values this process could not decode (each a miss)', (s, at) => [
    [at(), s.decodeErrors + s.foreign],
  ]],
  ['ziggurat_process_loader_calls_total', 'counter', BARE, 'Loader calls in this process, failed ones included', (s, at) => [[at(), s.loads]]],
  ['ziggurat_process_loader_errors_total', 'counter', BARE, 'Loader calls that raised', (s, at) => [[at(), s.loadErrors]]],
  ['ziggurat_process_loader_stale_served_total', 'counter', BARE, 'Failed loads answered with a stale value', (s, at) => [[at(), s.staleServed]]],
  ['ziggurat_process_loader_waits_total', 'counter', BARE, "Sleeps on another caller's load", (s, at) => [[at(), s.waits]]],
  ['ziggurat_process_loader_takeovers_total', 'counter', BARE, 'Load leases taken over from a dead process', (s, at) => [[at(), s.takeovers]]],
]

const warned = new Set()

/** Every sample of one cache as [name, labels, value]; never throws (a cache that cannot be read is up 0). */
function rows(cache) {
  const name = cache.name
  let s
  try {
    s = cache.stats()
  } catch (e) {
    // A scrape must not fail because one cache cannot be read (a closed one above all).
    if (!/is closed/.test(e.message) && !warned.has(name)) {
      warned.add(name)
      process.emitWarning(`ziggurat metrics: cannot read the stats of cache ${JSON.stringify(name)}: ${e.message}`, 'ZigguratWarning')
    }
    return [['ziggurat_up', { cache: name }, 0]]
  }
  const out = [
    ['ziggurat_up', { cache: name }, 1],
    ['ziggurat_degraded', { cache: name, cause: s.degradedCause ?? '' }, s.degraded ? 1 : 0],
  ]
  for (const [tier, seg] of [['l2', s.host], ['negative_l2', s.negHost]]) {
    if (Object.keys(seg).length === 0) continue // degraded: no segment, no host-wide figures
    for (const [key, metric] of HOST_SPECS) {
      if (seg[key] !== undefined) out.push([metric, { cache: name, tier }, seg[key]])
    }
  }
  const pid = String(process.pid)
  const at = (tier) => (tier === undefined ? { cache: name, pid } : { cache: name, pid, tier })
  for (const [metric, , , , pick] of PROC_SPECS) {
    for (const [labels, value] of pick(s, at)) out.push([metric, labels, value])
  }
  return out
}

function promClient() {
  try {
    return require('prom-client')
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e
    const err = new Error('collectMetrics(): prom-client is not installed: `npm install prom-client` (15 or later)')
    err.cause = e
    throw err
  }
}

/**
 * Reports `caches` in a prom-client `registry` (default: prom-client's global one): at each
 * scrape, every metric of docs/metrics.md that the Node.js package counts, read from each
 * cache's stats(). Returns a handle to report more caches, fewer, or none.
 *
 * @example
 * import { Registry } from 'prom-client'
 * import { collectMetrics } from 'ziggurat/metrics'
 * const registry = new Registry()
 * collectMetrics([cache], { registry })
 * await registry.metrics() // 'ziggurat_sets_total{cache="blog",tier="l2"} 1' ...
 */
function collectMetrics(caches, options) {
  const M = 'collectMetrics()'
  const prom = promClient()
  const list = caches instanceof Cache ? [caches] : caches
  if (!Array.isArray(list)) {
    throw new TypeError(`${M}: caches must be a Cache or an array of them, not ${list === null ? 'null' : typeof list}`)
  }
  const registry = options?.registry ?? prom.register
  if (!(registry instanceof prom.Registry)) {
    throw new TypeError(`${M}: registry must be a prom-client Registry (of the prom-client this package resolves)`)
  }
  const reported = []
  const add = (c) => {
    if (!(c instanceof Cache)) throw new TypeError(`${M}: each cache must be a ziggurat Cache`)
    if (reported.includes(c)) return
    if (reported.some((r) => r.name === c.name)) {
      throw new RangeError(`${M}: a cache named ${JSON.stringify(c.name)} is already reported, and two caches of one name would give the same series`)
    }
    reported.push(c)
  }
  list.forEach(add)

  // One read of the caches per scrape, shared by every metric's collect().
  let scrape = null
  const samples = () => {
    if (scrape === null) {
      scrape = new Map()
      for (const c of reported) {
        for (const [metric, labels, value] of rows(c)) {
          if (!scrape.has(metric)) scrape.set(metric, [])
          scrape.get(metric).push([labels, value])
        }
      }
      queueMicrotask(() => {
        scrape = null
      })
    }
    return scrape
  }
  const specs = [
    ['ziggurat_up', 'gauge', ['cache'], '1 when the cache is open and its counters were read, 0 when closed or unreadable'],
    ['ziggurat_degraded', 'gauge', ['cache', 'cause'], '1 when the answering process runs the cache without its shared segment'],
    ...HOST_SPECS.map(([, metric, kind, help]) => [metric, kind, HOST, help]),
    ...PROC_SPECS.map(([metric, kind, labels, help]) => [metric, kind, labels, help]),
  ]
  const metrics = specs.map(([name, kind, labelNames, help]) => {
    const Kind = kind === 'counter' ? prom.Counter : prom.Gauge
    return new Kind({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        this.reset()
        for (const [labels, value] of samples().get(name) ?? []) {
          if (kind === 'counter') this.inc(labels, value)
          else this.set(labels, value)
        }
      },
    })
  })
  return {
    /** Reports `cache` too. */
    add,
    /** Stops reporting `cache`. */
    remove(c) {
      const i = reported.indexOf(c)
      if (i < 0) throw new RangeError(`collectMetrics().remove(): the cache ${JSON.stringify(c?.name)} is not reported`)
      reported.splice(i, 1)
    },
    /** Removes every ziggurat metric from the registry. */
    unregister() {
      for (const m of metrics) registry.removeSingleMetric(m.name)
    },
  }
}

module.exports = { collectMetrics }
