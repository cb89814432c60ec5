'use strict'
// ziggurat's metrics through prom-client, under the names and labels of the Python
// exporter (docs/metrics.md): the host-wide figures of the segments, which any one
// worker reads for the whole host, and this process's own counters (`pid` label).
// Gathered over `cluster` workers (prom-client's AggregatorRegistry), a host-wide
// figure is taken once and a process's own figures add up: each family's scope, in
// the engine's table, gives its aggregator.

const { Cache } = require('./cache.cjs')
const native = require('./lib/native.cjs')
const { METRICS } = require('./lib/rules.cjs')

// The labels and the tier label's values are the engine's too.
const HOST = METRICS.host_labels
const PROC = METRICS.process_labels
const BARE = METRICS.process_untiered_labels
const [L1, NEG_L1, L2, NEG_L2] = METRICS.tiers

// Every family ({ group, key, prom, kind, help, ... }) comes from the engine's table, so
// that the names and help are Python's; the labels and where each value comes from are
// this package's.
const FAMILIES = native.metricFamilies()
const of = (group) => FAMILIES.filter((f) => f.group === group)
// The segment figures: `key` is a segment's stats key, tier l2 (entries) and negative_l2
// (cached misses and load leases).
const HOST_FAMILIES = of('host')

// By process family key: [labels, (stats, at) => [[labels, value], ...]].
const PROC_PICKS = {
  hits: [PROC, (s, at) => [
    [at(L1), s.l1.hits],
    [at(L2), s.l2.hits],
    [at(NEG_L2), s.negHits],
  ]],
  misses: [PROC, (s, at) => [
    [at(L1), s.l1.misses],
    [at(L2), s.l2.misses],
  ]],
  entries: [PROC, (s, at) => [
    [at(L1), s.l1.items],
    [at(NEG_L1), s.l1.negativeItems],
  ]],
  evictions: [PROC, (s, at) => [[at(L1), s.l1.evictions]]],
  stale_drops: [PROC, (s, at) => [[at(L1), s.l1.staleDrops]]],
  stale_reads: [PROC, (s, at) => [[at(L2), s.l2.staleReads]]],
  decode_errors: [BARE, (s, at) => [[at(), s.decodeErrors + s.foreign]]],
  write_errors: [BARE, (s, at) => [[at(), s.writeErrors]]],
  store_failures: [BARE, (s, at) => [[at(), s.storeFailures]]],
  loader_calls: [BARE, (s, at) => [[at(), s.loads]]],
  loader_errors: [BARE, (s, at) => [[at(), s.loadErrors]]],
  loader_stale_served: [BARE, (s, at) => [[at(), s.staleServed]]],
  loader_waits: [BARE, (s, at) => [[at(), s.waits]]],
  loader_takeovers: [BARE, (s, at) => [[at(), s.takeovers]]],
  loader_refreshes: [BARE, (s, at) => [[at(), s.refreshes]]],
  loader_seconds: [BARE, (s, at) => [[at(), s.loadSeconds]]],
  loader_max_seconds: [BARE, (s, at) => [[at(), s.loadMaxSeconds]]],
}
const PROC_FAMILIES = of('process').map((f) => {
  // Every family of the table is one both front ends report: a new one needs its pick here.
  if (!PROC_PICKS[f.key]) throw new Error(`ziggurat metrics: no stats() figure for ${f.prom}`)
  const [labels, pick] = PROC_PICKS[f.key]
  return { ...f, labels, pick }
})
const CACHE_LABELS = { up: METRICS.up_labels, degraded: METRICS.degraded_labels }
// Every worker reads the same host-wide figure at about the same time: the largest is
// the latest reading of a counter (never one that went back), and the host's once.
const AGGREGATORS = { host: 'max', process: 'sum' }

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
  for (const [tier, seg] of [[L2, s.host], [NEG_L2, s.negHost]]) {
    if (Object.keys(seg).length === 0) continue // degraded: no segment, no host-wide figures
    for (const { key, prom } of HOST_FAMILIES) {
      if (seg[key] !== undefined) out.push([prom, { cache: name, tier }, seg[key]])
    }
  }
  const pid = String(process.pid)
  const at = (tier) => (tier === undefined ? { cache: name, pid } : { cache: name, pid, tier })
  for (const { prom, pick } of PROC_FAMILIES) {
    for (const [labels, value] of pick(s, at)) out.push([prom, labels, value])
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
 * scrape, every metric of docs/metrics.md, read from each
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
    ...of('cache').map((f) => [f, CACHE_LABELS[f.key]]),
    ...HOST_FAMILIES.map((f) => [f, HOST]),
    ...PROC_FAMILIES.map((f) => [f, f.labels]),
  ]
  const metrics = specs.map(([{ prom: name, kind, help, scope }, labelNames]) => {
    const Kind = kind === 'counter' ? prom.Counter : prom.Gauge
    return new Kind({
      name,
      help,
      labelNames,
      aggregator: AGGREGATORS[scope],
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
