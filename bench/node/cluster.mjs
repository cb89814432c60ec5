// e) The cluster tier from Node.js: two hosts (two directories) of one cache on the
// run's redis-server, as two machines would have. Host B reads values host A wrote
// (L1 and L2 miss, L3 hit), against node-redis GET plus JSON.parse of the same JSON
// text; host A's writes with the tier against node-redis SET of the same bytes and a
// write of the cache without the tier.
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from 'redis'
import { Cache } from '../../node/index.js'
import { median } from './timing.mjs'
import { record } from './values.mjs'

const SECRET = 'bench-secret-0123456789abcdef'

/** The values of the section: a small record, and one of about 1 KiB of JSON. */
const VALUES = {
  'small object (~120 B JSON)': (i) => record(i),
  '1 KiB object': (i) => ({ ...record(i), bio: 'x'.repeat(900) }),
}

async function positioned(cache) {
  const deadline = Date.now() + 30_000
  while (!cache.stats().l3.positioned) {
    if (Date.now() > deadline) throw new Error('the host reader took no position')
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** ns per call of `f(i)` for i in [0, n), awaited one after the other. */
async function perCall(n, f) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) await f(i)
  return Number(process.hrtime.bigint() - t0) / n
}

/**
 * The section; `redis` is the run's server ({ port, version }), `S` the run's settings,
 * `h` the report's helpers ({ table, fmtNs }). Returns { goals, md, data }.
 */
export async function clusterTier(redis, S, h, run) {
  const url = `redis://127.0.0.1:${redis.port}/0`
  const dir = mkdtempSync(join(tmpdir(), 'ziggurat-bench-l3-'))
  const open = (label, options) => {
    mkdirSync(join(dir, label), { recursive: true })
    return new Cache(`${run}-l3`, { directory: join(dir, label), size: '64MiB', ...options })
  }
  const tier = { redis: url, secret: SECRET, redisTimeout: 1 }
  const a = open('a', tier)
  const b = open('b', tier)
  const plain = open('plain', {})
  const client = createClient({ url, RESP: 2 })
  await client.connect()
  const n = S.reps > 3 ? 300 : 100
  const rounds = S.reps > 3 ? 21 : 3
  const data = {}
  const goals = []
  const rows = []
  const writeRows = []
  try {
    await positioned(a)
    await positioned(b)
    let batch = 0
    for (const [vname, make] of Object.entries(VALUES)) {
      const got = { l3: [], redis: [], set: [], redisSet: [], plainSet: [] }
      for (let r = 0; r < rounds; r++) {
        batch++
        const keys = Array.from({ length: n }, (_, i) => `l3:${batch}:${i}`)
        const rkeys = keys.map((k) => `plain:${k}`)
        const values = keys.map((_, i) => make(i))
        const texts = values.map((v) => JSON.stringify(v))
        // The writes, timed: host A with the tier, node-redis SET, the cache alone (order alternates).
        const writes = [
          ['set', () => perCall(n, (i) => a.set(keys[i], values[i]))],
          ['redisSet', () => perCall(n, (i) => client.set(rkeys[i], texts[i]))],
          ['plainSet', () => perCall(n, (i) => plain.set(keys[i], values[i]))],
        ]
        for (const [what, f] of r % 2 ? [...writes].reverse() : writes) got[what].push(await f())
        const before = b.stats().l3.hits
        const reads = [
          ['l3', () => perCall(n, (i) => b.get(keys[i]))],
          ['redis', () => perCall(n, async (i) => JSON.parse(await client.get(rkeys[i])))],
        ]
        for (const [what, f] of r % 2 ? [...reads].reverse() : reads) got[what].push(await f())
        const hits = b.stats().l3.hits - before
        if (hits !== n) throw new Error(`host B answered ${hits} of ${n} reads from Redis`)
        const check = await b.get(keys[7])
        if (JSON.stringify(check) !== texts[7]) throw new Error('host B read another value')
      }
      const ratio = (x, y) => median(got[x].map((v, i) => v / got[y][i]))
      const spread = (x, y) => {
        const rs = got[x].map((v, i) => v / got[y][i])
        return `${Math.min(...rs).toFixed(2)}–${Math.max(...rs).toFixed(2)}`
      }
      const l3 = ratio('l3', 'redis')
      data[vname] = { ...got, l3_over_redis: l3, set_over_redis_set: ratio('set', 'redisSet') }
      goals.push([
        `L3 hit (L1 and L2 miss), ${vname}, vs node-redis GET + JSON.parse`,
        `${l3.toFixed(2)}× (rounds ${spread('l3', 'redis')})`,
        '≤ 1.0×',
        l3 <= 1.0,
      ])
      rows.push([
        vname,
        h.fmtNs(median(got.l3)),
        h.fmtNs(median(got.redis)),
        `${l3.toFixed(2)}× (${spread('l3', 'redis')})`,
      ])
      writeRows.push([
        vname,
        h.fmtNs(median(got.set)),
        h.fmtNs(median(got.redisSet)),
        h.fmtNs(median(got.plainSet)),
        `${ratio('set', 'redisSet').toFixed(2)}× (${spread('set', 'redisSet')})`,
        h.fmtNs(median(got.set) - median(got.plainSet)),
      ])
    }
  } finally {
    await client.quit()
    for (const c of [a, b, plain]) {
      c.unlink()
      c.close()
    }
    rmSync(dir, { recursive: true, force: true })
  }
  return {
    goals,
    data: { rounds, keys_per_round: n, ...data },
    md: [
      '## Node.js e) Cluster tier: an L3 hit and a write, against node-redis',
      '',
      `Two hosts (two directories) of one cache on the run's redis-server over loopback. In each of`,
      `${rounds} rounds host A writes ${n} new keys; host B then reads each once (its L1 and L2 miss:`,
      'an L3 hit, checked in its counters, the value checked, copied into its segment), and',
      'node-redis (RESP2, one connection) reads the same JSON text with `GET` and `JSON.parse`;',
      'the order of the cases alternates by round, each call awaited before the next. A figure is',
      "the median over the rounds of the mean per call; a ratio the median of the rounds' ratios",
      '(min–max after it).',
      '',
      h.table(['value', 'ziggurat get, L3 hit', 'node-redis GET + JSON.parse', 'ratio'], rows),
      '',
      'Writes: `await cache.set()` with the tier (the value and its event to Redis in one',
      'script call, then the host\'s segment), node-redis `SET` of the JSON text, and the same',
      '`set` on a cache without the tier; the last column is what the tier adds to a write.',
      '',
      h.table(['value', 'set with the tier', 'node-redis SET', 'set without the tier', 'tier / SET', 'the tier adds'], writeRows),
    ],
  }
}
