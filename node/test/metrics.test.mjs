// Metrics through the real prom-client: the names and labels of the Python exporter (its
// SPECS, docs/metrics.md), host-wide figures that count every process's writes, this
// process's own counters, and caches that are closed or degraded.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { test } from 'node:test'
import { Registry } from 'prom-client'
import { Cache } from 'ziggurat'
import { collectMetrics } from 'ziggurat/metrics'
import { cacheName, python, removedAfter } from './agents.mjs'

const names = removedAfter()

function open(what, options = { size: '8MiB' }) {
  const n = cacheName(what)
  names.push(n)
  return new Cache(n, options)
}

/** The samples of `text` (Prometheus' text format) as [name, labels, value]. */
function samples(text) {
  const out = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line)
    assert.ok(m, line)
    const labels = {}
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)) labels[k] = v
    out.push([m[1], labels, Number(m[3])])
  }
  return out
}

function value(all, name, labels) {
  const found = all.filter(([n, l]) => n === name && Object.entries(labels).every(([k, v]) => l[k] === v))
  assert.equal(found.length, 1, `${name} ${JSON.stringify(labels)}: ${found.length} samples`)
  return found[0][2]
}

test("the metrics are Python's: every name and its labels", async () => {
  const specs = JSON.parse(
    execFileSync(
      python(),
      ['-c', 'import json; from ziggurat.metric_samples import SPECS; print(json.dumps({s.prom: [s.kind, list(s.labels)] for s in SPECS}))'],
      { encoding: 'utf8' },
    ),
  )
  const cache = open('metrics-names')
  const registry = new Registry()
  collectMetrics([cache], { registry })
  cache.set('k', 1)
  const metrics = await registry.getMetricsAsJSON()
  assert.ok(metrics.length >= 30)
  for (const m of metrics) {
    assert.ok(specs[m.name], `${m.name} is not one of Python's metrics`)
    assert.equal(m.type, specs[m.name][0], m.name)
    for (const v of m.values) assert.deepEqual(Object.keys(v.labels).sort(), [...specs[m.name][1]].sort(), m.name)
  }
  cache.close()
})

/** Each family of `text` (Prometheus' text format) by name: its HELP text. */
function helps(text) {
  const out = new Map()
  for (const [, name, help] of text.matchAll(/^# HELP ([a-z_]+) (.*)$/gm)) out.set(name, help)
  return out
}

test('both front ends expose the same host families, under the same help', async () => {
  const cache = open('metrics-help')
  const registry = new Registry()
  collectMetrics([cache], { registry })
  const text = await registry.metrics()
  const py = open('metrics-help-py')
  py.close()
  const pyText = execFileSync(
    python(),
    [
      '-c',
      'import sys; from prometheus_client import CollectorRegistry, generate_latest; from ziggurat import Cache; from ziggurat.metrics import register\n' +
        'c = Cache(sys.argv[1], size="8MiB"); r = CollectorRegistry(); register(c, registry=r); print(generate_latest(r).decode()); c.close()',
      py.name,
    ],
    { encoding: 'utf8' },
  )
  // The host families are the ones with a tier and no pid, in each front end's own output.
  const host = (t) => new Set(samples(t).filter(([, l]) => 'tier' in l && !('pid' in l)).map(([n]) => n))
  const nodeHost = host(text)
  assert.ok(nodeHost.size >= 20, [...nodeHost].join(' '))
  assert.deepEqual([...nodeHost].sort(), [...host(pyText)].sort())
  const nodeHelp = helps(text)
  const pyHelp = helps(pyText)
  for (const name of nodeHost) assert.equal(nodeHelp.get(name), pyHelp.get(name), name)
  // Every family Node.js reports is Python's too, with the same help, and the other way round.
  for (const [name, help] of nodeHelp) assert.equal(help, pyHelp.get(name), name)
  assert.deepEqual([...nodeHelp.keys()].sort(), [...pyHelp.keys()].sort())
  cache.close()
})

test('host-wide figures count every process’s writes; process figures carry the pid', async () => {
  const cache = open('metrics-host')
  const registry = new Registry()
  collectMetrics(cache, { registry })
  cache.set('a', { x: 1 })
  cache.get('a')
  cache.get('missing')
  execFileSync(
    python(),
    ['-c', 'import sys; from ziggurat import Cache; c = Cache(sys.argv[1], "8MiB"); c.set("py", [1]); c.set("py2", [2]); c.close()', cache.name],
  )
  await cache.getOrSet('loaded', async () => 'v')
  const all = samples(await registry.metrics())
  const c = cache.name
  const pid = String(process.pid)
  assert.equal(value(all, 'ziggurat_up', { cache: c }), 1)
  assert.equal(value(all, 'ziggurat_degraded', { cache: c, cause: '' }), 0)
  assert.equal(value(all, 'ziggurat_sets_total', { cache: c, tier: 'l2' }), 4)
  assert.equal(value(all, 'ziggurat_entries', { cache: c, tier: 'l2' }), 4)
  assert.ok(value(all, 'ziggurat_file_size_bytes', { cache: c, tier: 'negative_l2' }) > 0)
  assert.equal(value(all, 'ziggurat_process_hits_total', { cache: c, pid, tier: 'l1' }), 1)
  assert.equal(value(all, 'ziggurat_process_misses_total', { cache: c, pid, tier: 'l2' }), 2)
  assert.equal(value(all, 'ziggurat_process_loader_calls_total', { cache: c, pid }), 1)
  assert.equal(value(all, 'ziggurat_process_loader_refreshes_total', { cache: c, pid }), 0)
  assert.equal(value(all, 'ziggurat_process_entries', { cache: c, pid, tier: 'l1' }), 2)
  cache.close()
  const closed = samples(await registry.metrics())
  assert.equal(value(closed, 'ziggurat_up', { cache: c }), 0)
  assert.equal(closed.filter(([n, l]) => n === 'ziggurat_sets_total' && l.cache === c).length, 0)
})

test("this process's L1 evictions and stale drops, stale reads, write errors and loader seconds", async (t) => {
  const cache = open('metrics-process', { size: '8MiB', l1Items: 2 })
  const registry = new Registry()
  collectMetrics(cache, { registry })
  t.mock.method(process, 'emitWarning', () => {})
  const c = cache.name
  const pid = String(process.pid)
  // Three values in an L1 of two: one evicted.
  for (const k of ['a', 'b', 'c']) cache.set(k, { k })
  assert.equal(cache.stats().l1.evictions, 1)
  // A write by another process voids the L1 entry of 'c': dropped at the next read.
  execFileSync(python(), ['-c', 'import sys; from ziggurat import Cache; c = Cache(sys.argv[1], "8MiB"); c.set("c", 2); c.close()', c])
  assert.equal(cache.get('c'), 2)
  assert.equal(cache.stats().l1.staleDrops, 1)
  // A loader's 60 ms, and a value it returned that cannot be stored (a Map).
  await cache.getOrSet('slow', () => new Promise((resolve) => setTimeout(() => resolve(1), 60)))
  assert.ok((await cache.getOrSet('map', () => new Map())) instanceof Map)
  // An expired value kept for staleTtl, read as the fallback of a load that fails.
  await cache.getOrSet('s', () => 'old', { ttl: 0.05, staleTtl: 60 })
  await new Promise((resolve) => setTimeout(resolve, 120))
  assert.equal(await cache.getOrSet('s', () => Promise.reject(new Error('down')), { staleTtl: 60 }), 'old')
  const s = cache.stats()
  assert.equal(s.l1.staleDrops, 2) // and the expired entry of 's'
  assert.equal(s.l2.staleReads, 1)
  assert.deepEqual([s.writeErrors, s.storeFailures], [1, 1])
  assert.equal(s.loads, 4)
  assert.ok(s.loadMaxSeconds >= 0.055 && s.loadSeconds >= s.loadMaxSeconds, JSON.stringify(s))
  const all = samples(await registry.metrics())
  assert.equal(value(all, 'ziggurat_process_evictions_total', { cache: c, pid, tier: 'l1' }), s.l1.evictions)
  assert.equal(value(all, 'ziggurat_process_stale_drops_total', { cache: c, pid, tier: 'l1' }), 2)
  assert.equal(value(all, 'ziggurat_process_stale_reads_total', { cache: c, pid, tier: 'l2' }), 1)
  assert.equal(value(all, 'ziggurat_process_write_errors_total', { cache: c, pid }), 1)
  assert.equal(value(all, 'ziggurat_process_store_failures_total', { cache: c, pid }), 1)
  assert.equal(value(all, 'ziggurat_process_loader_max_seconds', { cache: c, pid }), s.loadMaxSeconds)
  assert.equal(value(all, 'ziggurat_process_entries', { cache: c, pid, tier: 'negative_l1' }), 0)
  cache.close()
})

test('a degraded cache reports its cause and no host-wide series', async () => {
  const cache = open('metrics-degraded', { size: '8MiB', directory: '/nonexistent/dir' })
  const registry = new Registry()
  const handle = collectMetrics([cache], { registry })
  const all = samples(await registry.metrics())
  assert.equal(value(all, 'ziggurat_degraded', { cache: cache.name, cause: 'missing_directory' }), 1)
  assert.equal(all.filter(([n]) => n === 'ziggurat_sets_total').length, 0)
  handle.remove(cache)
  assert.equal(samples(await registry.metrics()).length, 0)
  handle.unregister()
  assert.equal((await registry.getMetricsAsJSON()).length, 0)
  cache.close()
})

test('bad arguments are refused', () => {
  const cache = open('metrics-bad')
  const registry = new Registry()
  assert.throws(() => collectMetrics('x', { registry }), TypeError)
  assert.throws(() => collectMetrics([cache], { registry: {} }), TypeError)
  const h = collectMetrics([cache], { registry })
  assert.throws(() => h.add(new Cache(cache.name, { size: '8MiB' })), RangeError)
  cache.close()
})
