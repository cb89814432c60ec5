// The package applies the Cache's rules as ziggurat-cache's table says (the
// addon's rules()): each value its modules use on their own side (the tag
// limits, the option defaults, the mode names, the step kinds, the value
// codes, the JSON depth, the metric labels) is checked against the table, and
// so are the defaults docs/node.md and index.d.cts write down.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { Registry } from 'prom-client'
import { Cache } from 'ziggurat'
import { collectMetrics } from 'ziggurat/metrics'
import { cacheName, removedAfter } from './agents.mjs'

const require = createRequire(import.meta.url)
const native = require('../lib/native.cjs')
const rules = require('../lib/rules.cjs')
const args = require('../lib/args.cjs')
const { cacheOptions } = require('../lib/options.cjs')
const { MODES } = require('../lib/degraded.cjs')
const { encode, checkPlain } = require('../lib/values.cjs')

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const TABLE = native.rules()
const names = removedAfter()

/** The table's rules of one group, by the name after the group's. */
function group(name) {
  return Object.fromEntries(
    Object.entries(TABLE)
      .filter(([k]) => k.startsWith(`${name}.`))
      .map(([k, v]) => [k.slice(name.length + 1), v]),
  )
}

const snake = (s) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
const DEFAULTS = group('defaults')

test('the package reads the whole table', () => {
  assert.deepEqual({ ...rules.RULES }, TABLE)
  assert.deepEqual(
    new Set(Object.keys(TABLE).map((k) => k.split('.')[0])),
    new Set(['tags', 'key', 'defaults', 'modes', 'steps', 'codes', 'envelope', 'metrics']),
  )
})

test('tag limits: at most tags.max, none shorter than tags.min_bytes', () => {
  const max = TABLE['tags.max']
  assert.equal(TABLE['tags.min_bytes'], 1)
  assert.equal(args.tags(Array(max).fill('t'), 'm').length, max)
  assert.throws(() => args.tags(Array(max + 1).fill('t'), 'm'), new RegExp(`at most ${max} tags per entry`))
  assert.throws(() => args.tags(['t', ''], 'm'), /a tag must not be empty/)
  assert.equal(native.MAX_KEY_BYTES, TABLE['key.max_bytes'])
})

test('every option default is the table’s', () => {
  const o = cacheOptions({})
  const used = {
    l1_items: o.l1Items,
    ttl: o.ttl,
    neg_ttl: o.open.negTtl,
    jitter: o.open.jitter,
    refresh_ahead: o.refreshAhead,
    loader_timeout: o.loaderTimeout,
    avg_item_size: o.open.avgItemSize,
    degraded_ttl: o.degradedTtl,
    directory: o.open.directory,
    serializer: o.serializer,
    copy: o.copy,
    degraded: o.mode,
    huge_pages: o.open.hugePages,
  }
  for (const [name, value] of Object.entries(used)) assert.equal(value, DEFAULTS[name], name)
  assert.equal(o.l1NegativeItems, Math.floor(o.l1Items / DEFAULTS.l1_negative_share))
  assert.equal(cacheOptions({ l1Items: 95 }).l1NegativeItems, Math.floor(95 / DEFAULTS.l1_negative_share))
})

test('mode names', () => {
  assert.deepEqual(MODES, TABLE['modes.degraded'])
  for (const mode of TABLE['modes.degraded']) assert.equal(cacheOptions({ degraded: mode }).mode, mode)
  for (const mode of TABLE['modes.copy']) assert.equal(cacheOptions({ copy: mode }).copy, mode)
  assert.throws(() => cacheOptions({ degraded: 'none-of-them' }), /degraded must be/)
  assert.throws(() => cacheOptions({ copy: 'none-of-them' }), /copy must be/)
})

test('step kinds and value codes: one numbering, the addon’s', async () => {
  assert.deepEqual({ ...rules.STEPS }, group('steps'))
  assert.deepEqual({ ...rules.CODES }, group('codes'))
  const codes = group('codes')
  assert.equal(encode('text', 'm')[0], codes.JSON_TEXT)
  assert.equal(encode({ a: 1 }, 'm')[0], codes.JSON_TEXT)
  assert.equal(encode(Buffer.from('b'), 'm')[0], codes.BYTES)
  assert.equal(encode(7, 'm')[0], codes.COUNTER)
  assert.equal(encode(7n, 'm')[0], codes.COUNTER)
  // Through the addon without L1: a load (LOAD), a value found (HIT), a
  // cached miss found (HIT, value code NEGATIVE).
  const n = cacheName('rules')
  names.push(n)
  const c = new Cache(n, { size: '8MiB', l1Items: 0 })
  try {
    let calls = 0
    const load = (v) => async () => {
      calls++
      return v
    }
    assert.equal(await c.getOrSet('v', load('one')), 'one')
    assert.equal(await c.getOrSet('v', load('two')), 'one')
    assert.equal(await c.getOrSet('nothing', load(null)), undefined)
    assert.equal(await c.getOrSet('nothing', load('late')), undefined)
    assert.equal(calls, 2)
  } finally {
    c.close()
  }
})

test('the JSON depth', () => {
  const depth = TABLE['envelope.max_depth']
  assert.equal(rules.MAX_DEPTH, depth)
  const nested = (k) => {
    let v = []
    for (let i = 0; i < k; i++) v = [v]
    return v
  }
  checkPlain(nested(depth), 'm', new Set(), 0)
  assert.throws(() => checkPlain(nested(depth + 1), 'm', new Set(), 0), new RegExp(`more than ${depth} levels`))
})

test('metric labels and tiers', async () => {
  const metrics = group('metrics')
  const tables = new Set(
    Object.entries(metrics)
      .filter(([k]) => k.endsWith('labels'))
      .map(([, v]) => v.join(',')),
  )
  const n = cacheName('rules')
  names.push(n)
  const c = new Cache(n, { size: '8MiB' })
  const registry = new Registry()
  try {
    c.set('k', 1)
    collectMetrics([c], { registry })
    const used = new Set()
    const tiers = new Set()
    for (const m of await registry.getMetricsAsJSON()) {
      for (const { labels } of m.values) {
        used.add(Object.keys(labels).join(','))
        if (labels.tier !== undefined) tiers.add(labels.tier)
      }
    }
    assert.deepEqual(used, tables)
    assert.deepEqual(tiers, new Set(metrics.tiers))
  } finally {
    c.close()
  }
})

/** A default as the docs write it: a number or a quoted string. */
function literal(text) {
  const t = text.replace(/_/g, '')
  if (/^'[^']*'$/.test(t)) return t.slice(1, -1)
  assert.match(t, /^[0-9.]+$/, text)
  return Number(t)
}

test('the defaults docs/node.md writes are the table’s', () => {
  const page = readFileSync(join(root, 'docs', 'node.md'), 'utf8')
  let checked = 0
  for (const [, option, value] of page.matchAll(/^\| `(\w+)` \| `([^`]+)` \|/gm)) {
    const name = snake(option)
    if (name in DEFAULTS) {
      assert.equal(literal(value), DEFAULTS[name], option)
      checked++
    } else if (name === 'l1_negative_items') {
      assert.equal(value, `l1Items / ${DEFAULTS.l1_negative_share}`)
      checked++
    }
  }
  assert.ok(checked >= 14, `${checked} defaults found`)
})

test('the defaults and mode names index.d.cts writes are the table’s', () => {
  const types = readFileSync(join(here, '..', 'index.d.cts'), 'utf8')
  let checked = 0
  // A documented option: its JSDoc, then `name?: type`.
  for (const [, doc, option, type] of types.matchAll(/\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*(\w+)\?: ([^\n]+)/g)) {
    const name = snake(option)
    if (!(name in DEFAULTS)) continue
    const said =
      /\(default ([^;):\s]+)/.exec(doc)?.[1] ??
      /'(\w+)' \(default/.exec(doc)?.[1] ??
      /\('(\w+)', default\)/.exec(doc)?.[1]
    if (said === undefined) continue
    assert.equal(typeof DEFAULTS[name] === 'string' ? said.replace(/'/g, '') : literal(said), DEFAULTS[name], option)
    checked++
    const modes = TABLE[`modes.${name}`]
    if (modes !== undefined) assert.equal(type.trim(), modes.map((m) => `'${m}'`).join(' | '), option)
  }
  assert.ok(checked >= 12, `${checked} defaults found`)
})
