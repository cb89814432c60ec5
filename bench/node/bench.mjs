// The Node.js benchmarks of ziggurat against its peers (`make bench-node`):
//
//   node bench/node/bench.mjs            every table, 7 interleaved reps per figure
//   node bench/node/bench.mjs --quick    3 short reps (a smoke run; writes nothing to docs)
//   node bench/node/bench.mjs --only a,b some tables (printed; writes nothing to docs)
//
// Writes the raw figures to bench/node.json, the section to bench/node.md
// and that section into docs/benchmarks.md (bench/run.py keeps it there).
import cluster from 'node:cluster'
import { execFileSync, execFile } from 'node:child_process'
import { readFileSync, writeFileSync, rmSync, mkdtempSync, existsSync } from 'node:fs'
import { cpus, totalmem, loadavg, release, tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { LRUCache } from 'lru-cache'
import { open } from 'lmdb'
import { BentoCache, bentostore } from 'bentocache'
import { memoryDriver } from 'bentocache/drivers/memory'
import { redisDriver } from 'bentocache/drivers/redis'
import { Cache } from '../../node/index.js'
import { alternate, interleave, kase, paired, pairedRange, summary, median } from './timing.mjs'
import { startRedis } from './redis.mjs'
import { clusterTier } from './cluster.mjs'
import { lagSection } from './lag.mjs'
import { KEYS, record } from './values.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = join(HERE, '..', '..')
const quick = process.argv.includes('--quick')
const onlyAt = process.argv.indexOf('--only')
const only = onlyAt > 0 ? new Set(process.argv[onlyAt + 1].split(',')) : null
const S = quick
  ? { reps: 3, repMs: 40, herdRounds: 3, pairRounds: 9, pairMs: 10 }
  : { reps: 7, repMs: 150, herdRounds: 12, pairRounds: 41, pairMs: 20 }
const LOADER_MS = 20
const run = `bench-node-${process.pid}`
const results = { sections: {} }
let sink = 0

const fmtNs = (ns) => (ns >= 10_000 ? `${(ns / 1000).toFixed(1)} µs` : ns >= 1000 ? `${(ns / 1000).toFixed(2)} µs` : `${ns.toFixed(0)} ns`)
const fig = (c) => {
  const s = summary(c.samples)
  return `${fmtNs(s.median)} (${fmtNs(s.min)}–${fmtNs(s.max)})`
}
const ratio = (a, b) => {
  const [lo, hi] = pairedRange(a, b)
  return `${paired(a, b).toFixed(2)}× (${lo.toFixed(2)}–${hi.toFixed(2)})`
}
function table(header, rows) {
  const line = (cells) => `| ${cells.join(' | ')} |`
  return [line(header), line(header.map((_, i) => (i === 0 ? '---' : '---:'))), ...rows.map(line)].join('\n')
}
/** A goal's ratio from alternated pairs of short reps: [median, min, max, text]. */
async function goalRatio(a, b) {
  const rs = await alternate(a, b, { rounds: S.pairRounds, pairMs: S.pairMs })
  const [m, lo, hi] = [median(rs), Math.min(...rs), Math.max(...rs)]
  return { value: m, range: [lo, hi], text: `${m.toFixed(2)}× (pairs ${lo.toFixed(2)}–${hi.toFixed(2)})` }
}

function keep(name, cases, extra = {}) {
  results.sections[name] = {
    ...extra,
    cases: Object.fromEntries(cases.map((c) => [c.name, { ...summary(c.samples), loops: c.loops, samples: c.samples }])),
  }
}

// --- a) L1 hit ---------------------------------------------------------------------------

async function l1Hit() {
  const map = new Map()
  const lru = new LRUCache({ max: 10_000 })
  const lruTtl = new LRUCache({ max: 10_000, ttl: 300_000 })
  const cache = new Cache(`${run}-l1`, { ttl: 300 })
  KEYS.forEach((k, i) => {
    const v = record(i)
    map.set(k, v)
    lru.set(k, v)
    lruTtl.set(k, v)
    cache.set(k, v)
  })
  const loop = (get) => (n) => {
    let m = 0
    for (let i = 0; i < n; i++) if (get(KEYS[i & 1023]) === undefined) m++
    sink += m
  }
  const cases = [
    kase('Map.get', loop((k) => map.get(k))),
    kase('lru-cache get', loop((k) => lru.get(k))),
    kase('lru-cache get (ttl 300 s)', loop((k) => lruTtl.get(k))),
    kase('ziggurat get (ttl 300 s)', loop((k) => cache.get(k))),
  ]
  await interleave(cases, S)
  const [mp, , lt, z] = cases
  const g = await goalRatio(z, lt)
  if (cache.stats().l1.hits < z.loops) throw new Error('the ziggurat L1 did not answer the hits')
  cache.unlink()
  cache.close()
  keep('l1_hit', cases, { goal: { measure: 'ziggurat / lru-cache (ttl)', value: g.value, range: g.range, goal: 1.5, ok: g.value <= 1.5 } })
  return {
    goals: [['L1 hit / lru-cache get (ttl 300 s)', g.text, '≤ 1.5×', g.value <= 1.5]],
    md: [
      '## Node.js a) L1 hit of a small object',
      '',
      'One process, 1024 keys read round-robin, values kept as live objects. ziggurat validates each',
      'hit against the segment\'s words (key stamp, epoch, tags, TTL) with `Atomics.load`.',
      '',
      table(
        ['', 'ns per get', '× Map.get', '× lru-cache (ttl)'],
        cases.map((c) => [c.name, fig(c), ratio(c, mp), ratio(c, lt)]),
      ),
    ],
  }
}

// --- b) a hit in the segment of a value another process wrote -----------------------------

async function segmentHit() {
  const dir = mkdtempSync(join(tmpdir(), 'ziggurat-bench-lmdb-'))
  const name = `${run}-seg`
  await promisify(execFile)(process.execPath, [join(HERE, 'writer.mjs'), name, dir])
  const cache = new Cache(name, { l1Items: 0 })
  const db = open({ path: dir, encoding: 'binary', readOnly: true })
  const texts = KEYS.map((k) => db.get(k).toString())
  const cases = [
    kase('JSON.parse alone (same text)', (n) => {
      let m = 0
      for (let i = 0; i < n; i++) if (JSON.parse(texts[i & 1023]).id < 0) m++
      sink += m
    }),
    kase('lmdb-js get + JSON.parse', (n) => {
      let m = 0
      for (let i = 0; i < n; i++) if (JSON.parse(db.get(KEYS[i & 1023])).id < 0) m++
      sink += m
    }),
    kase('lmdb-js getBinaryFast + JSON.parse', (n) => {
      let m = 0
      for (let i = 0; i < n; i++) if (JSON.parse(db.getBinaryFast(KEYS[i & 1023])).id < 0) m++
      sink += m
    }),
    kase('ziggurat get (no L1: segment + decode)', (n) => {
      let m = 0
      for (let i = 0; i < n; i++) if (cache.get(KEYS[i & 1023]).id < 0) m++
      sink += m
    }),
  ]
  await interleave(cases, S)
  const [js, lm, , z] = cases
  const g = await goalRatio(z, lm)
  if (cache.stats().l2.hits < z.loops) throw new Error('the segment did not answer the reads')
  cache.unlink()
  cache.close()
  db.close()
  rmSync(dir, { recursive: true, force: true })
  keep('segment_hit', cases, { goal: { measure: 'ziggurat / (lmdb-js get + JSON.parse)', value: g.value, range: g.range, goal: 0.5, ok: g.value <= 0.5 } })
  return {
    goals: [['segment hit + decode / lmdb-js get + JSON.parse', g.text, '≤ 0.5×', g.value <= 0.5]],
    md: [
      '## Node.js b) hit in the segment of a small object another process wrote, decode included',
      '',
      'Another process wrote the 1024 objects (ziggurat `set`; lmdb-js `put` of the same JSON',
      'bytes, `encoding: \'binary\'`, in /tmp); this one reads them round-robin. ziggurat with',
      '`l1Items: 0`, so every `get` reads the segment and parses the JSON text.',
      '',
      table(
        ['', 'ns per get', '× lmdb-js get + parse', '× JSON.parse alone'],
        cases.map((c) => [c.name, fig(c), ratio(c, lm), ratio(c, js)]),
      ),
      '',
      `JSON.parse of the text alone takes ${ratio(js, lm)} of lmdb-js get + JSON.parse, and`,
      'ziggurat parses the same text: the goal of 0.5× leaves the read of the segment and the',
      'call into the addon the difference.',
    ],
  }
}

// --- c) getOrSet on a hit and on a miss --------------------------------------------------

async function getOrSet(redis) {
  const cache = new Cache(`${run}-gos`, { ttl: 300, l1Items: 10_000 })
  const stores = { memory: bentostore().useL1Layer(memoryDriver({ maxItems: 10_000 })) }
  if (redis) {
    stores.redis = bentostore()
      .useL1Layer(memoryDriver({ maxItems: 10_000 }))
      .useL2Layer(redisDriver({ connection: { host: '127.0.0.1', port: redis.port } }))
  }
  const bento = new BentoCache({ default: 'memory', stores })
  const lru = new LRUCache({ max: 10_000, ttl: 300_000 })
  const loaderFor = (i) => () => record(i)
  const viaLru = async (k, load) => {
    let v = lru.get(k)
    if (v === undefined) {
      v = await load()
      lru.set(k, v)
    }
    return v
  }
  const backends = [
    ['ziggurat getOrSet', (k, load) => cache.getOrSet(k, load, { ttl: 300 })],
    ['BentoCache getOrSet (memory)', (k, load) => bento.use('memory').getOrSet({ key: k, factory: load, ttl: '5m' })],
    ...(redis
      ? [['BentoCache getOrSet (memory + Redis)', (k, load) => bento.use('redis').getOrSet({ key: k, factory: load, ttl: '5m' })]]
      : []),
    ['lru-cache get, load, set (by hand)', viaLru],
  ]
  const hits = []
  for (const [label, f] of backends) {
    for (let i = 0; i < KEYS.length; i++) await f(KEYS[i], loaderFor(i))
    hits.push(
      kase(label, async (n) => {
        let m = 0
        for (let i = 0; i < n; i++) if ((await f(KEYS[i & 1023], loaderFor(i & 1023))).id < 0) m++
        sink += m
      }),
    )
  }
  await interleave(hits, S)
  let fresh = 0
  const misses = backends.map(([label, f]) =>
    kase(label, async (n) => {
      for (let i = 0; i < n; i++) {
        const k = `miss:${fresh++}`
        if ((await f(k, loaderFor(i & 1023))) === undefined) sink++
      }
    }),
  )
  await interleave(misses, S)
  cache.unlink()
  cache.close()
  await bento.disconnectAll()
  const zh = hits[0]
  const zm = misses[0]
  const bh = hits[1]
  const bm = misses[1]
  keep('get_or_set_hit', hits)
  keep('get_or_set_miss', misses)
  return {
    goals: [],
    md: [
      '## Node.js c) getOrSet on a hit and on a miss',
      '',
      'One process, `await` of each call. Hit: 1024 keys loaded beforehand, read round-robin',
      '(ziggurat and BentoCache answer from their in-process layer). Miss: a new key each call,',
      'the loader returns a small object at once (no I/O), and the value is stored.',
      'BentoCache: default options (its memory driver keeps serialized values, 10,000 items);',
      '"memory + Redis" adds its Redis driver (ioredis) over the run\'s redis-server on',
      '127.0.0.1, without a bus.',
      '',
      table(
        ['', 'hit', '× ziggurat', 'miss', '× ziggurat'],
        backends.map((_, i) => [hits[i].name, fig(hits[i]), ratio(hits[i], zh), fig(misses[i]), ratio(misses[i], zm)]),
      ),
      '',
      `ziggurat's hit is ${ratio(zh, bh)} BentoCache's (memory), its miss ${ratio(zm, bm)}.`,
    ],
  }
}

// --- d) four workers missing the same keys at once ---------------------------------------

async function herd(redis) {
  const name = `${run}-herd`
  const seed = new Cache(name)
  cluster.setupPrimary({ exec: join(HERE, 'herd-worker.mjs'), silent: false })
  const env = { HERD_CACHE: name, ...(redis ? { REDIS_PORT: String(redis.port) } : {}) }
  const workers = []
  for (let i = 0; i < 4; i++) workers.push(cluster.fork(env))
  await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))))
  const backends = ['ziggurat', 'memory', ...(redis ? ['redis'] : [])]
  const labels = { ziggurat: 'ziggurat getOrSet', memory: 'BentoCache (memory)', redis: 'BentoCache (memory + Redis)' }
  const out = Object.fromEntries(backends.map((b) => [b, { loads: [], ms: [] }]))
  for (let r = 0; r < S.herdRounds + 1; r++) {
    for (let j = 0; j < backends.length; j++) {
      const b = backends[(j + r) % backends.length]
      const key = `herd:${b}:${r}`
      const replies = workers.map((w) => new Promise((res) => w.once('message', res)))
      const t0 = performance.timeOrigin + performance.now()
      for (const w of workers) w.send({ backend: b, key, loaderMs: LOADER_MS })
      const got = await Promise.all(replies)
      if (!got.every((g) => g.ok)) throw new Error(`a ${b} worker did not get the value`)
      if (r === 0) continue // the first round warms each backend
      out[b].loads.push(got.reduce((s, g) => s + g.loads, 0))
      out[b].ms.push(Math.max(...got.map((g) => g.done)) - t0)
    }
  }
  for (const w of workers) w.send({ stop: true })
  await Promise.all(workers.map((w) => new Promise((r) => (w.isDead() ? r() : w.once('exit', r)))))
  seed.unlink()
  seed.close()
  const rows = backends.map((b) => {
    const s = summary(out[b].ms)
    return [labels[b], `${median(out[b].loads)} (${Math.min(...out[b].loads)}–${Math.max(...out[b].loads)})`, `${s.median.toFixed(1)} ms (${s.min.toFixed(1)}–${s.max.toFixed(1)})`]
  })
  results.sections.herd = { loaderMs: LOADER_MS, rounds: S.herdRounds, backends: out }
  const zl = Math.max(...out.ziggurat.loads)
  return {
    goals: [['loads per key, 4 workers missing at once', `${zl}`, '1', zl === 1]],
    md: [
      '## Node.js d) four cluster.fork() workers missing the same key at once',
      '',
      `Four workers get the same new key at the same moment; the loader takes ${LOADER_MS} ms.`,
      `${S.herdRounds} keys per backend (rounds interleaved); loads are summed over the four`,
      'workers, and the time runs from the primary\'s message to the last worker holding the value',
      '(IPC included, the same for every backend).',
      '',
      table(['', 'loads per key', 'time until all 4 have it'], rows),
    ],
  }
}

// --- the report --------------------------------------------------------------------------

function version(pkg) {
  return JSON.parse(readFileSync(join(HERE, 'node_modules', pkg, 'package.json'), 'utf8')).version
}

function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

function splice(section) {
  const doc = join(ROOT, 'docs', 'benchmarks.md')
  const text = readFileSync(doc, 'utf8')
  const lines = text.split('\n')
  const start = lines.findIndex((l) => l.startsWith('## Node.js'))
  let next
  if (start >= 0) {
    next = lines.findIndex((l, i) => i > start && l.startsWith('## ') && !l.startsWith('## Node.js'))
    lines.splice(start, (next < 0 ? lines.length : next) - start, ...section.split('\n'), '')
  } else {
    const at = lines.findIndex((l) => l.startsWith('## Software versions'))
    lines.splice(at < 0 ? lines.length : at, 0, ...section.split('\n'), '')
  }
  writeFileSync(doc, lines.join('\n'))
}

// --- e) the cluster tier (bench/node/cluster.mjs) ---------------------------------------------

async function clusterSection(redis) {
  if (!redis) return null
  const part = await clusterTier(redis, S, { table, fmtNs }, run)
  results.sections.cluster_tier = part.data
  return part
}

async function lagBetweenLanguages(redis) {
  if (!redis) return null
  const part = await lagSection(redis, S, { table }, run)
  results.sections.cluster_lag = part.data
  return part
}

async function main() {
  const t0 = Date.now()
  const load0 = loadavg()[0]
  // REDIS_SERVER: another server binary (valkey-server) where redis-server is missing.
  const redis = await startRedis(process.env.REDIS_SERVER ?? 'redis-server').catch((e) => {
    console.error(`no redis-server (${e.message}): the Redis rows are left out`)
    return null
  })
  const parts = []
  try {
    for (const [label, f] of [
      ['a) L1 hit', l1Hit],
      ['b) segment hit', segmentHit],
      ['c) getOrSet', () => getOrSet(redis)],
      ['d) herd', () => herd(redis)],
      ['e) cluster tier', () => clusterSection(redis)],
      ['f) lag between languages', () => lagBetweenLanguages(redis)],
    ]) {
      if (only && !only.has(label[0])) continue
      console.error(`node bench ${label}...`)
      const part = await f()
      if (part !== null) parts.push(part)
    }
  } finally {
    await redis?.stop()
  }
  const cpu = cpus()
  const meta = {
    command: `make bench-node (node bench/node/bench.mjs${quick ? ' --quick' : ''})`,
    date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
    commit: gitCommit(),
    seconds: (Date.now() - t0) / 1000,
    machine: `${cpu.length} CPUs (${cpu[0]?.model ?? 'unknown'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, Linux ${release()}`,
    loadavg: [load0, loadavg()[0]],
    versions: {
      node: process.version,
      'lru-cache': version('lru-cache'),
      lmdb: version('lmdb'),
      bentocache: version('bentocache'),
      ioredis: version('ioredis'),
      redis: version('redis'),
      'redis-server': redis?.version ?? 'not run',
    },
    settings: S,
  }
  results.meta = meta
  const goals = parts.flatMap((p) => p.goals)
  const md = [
    '## Node.js',
    '',
    'Generated by `node bench/node/bench.mjs` (`make bench-node`, also run by `make bench`);',
    'raw figures in bench/node.json.',
    '',
    `* command: \`${meta.command}\`; date ${meta.date}; commit ${meta.commit}; took ${meta.seconds.toFixed(0)} s`,
    `* machine: ${meta.machine}; load average (1 min) at start / end ${meta.loadavg[0].toFixed(2)} / ${meta.loadavg[1].toFixed(2)}`,
    `* versions: ${Object.entries(meta.versions).map(([k, v]) => `${k} ${v}`).join(', ')}`,
    `* method: each figure is the median of ${S.reps} repetitions (~${S.repMs} ms each, loop counts calibrated),`,
    '  interleaved round-robin across the rows of its table, with the min–max of the reps in',
    '  parentheses; a ratio is the median of the per-round ratios (min–max after it). A goal\'s',
    `  ratio comes from ${S.pairRounds} pairs of ~${S.pairMs} ms reps of the two cases run back to back`,
    '  (which runs first alternates): the median of the pairs\' ratios, their min–max after it.',
    '* the machine is shared: 2 vCPUs with other work running beside the benchmark (the load',
    '  average above), so single reps vary by up to 2× or more; compare ratios, not ns.',
    '',
    table(['measure', 'measured', 'goal', 'status'], goals.map(([m, v, g, ok]) => [m, v, g, ok ? 'meets' : '**misses**'])),
    '',
    ...parts.flatMap((p) => [...p.md, '']),
  ].join('\n')
  if (quick || only) {
    process.stdout.write(md)
  } else {
    writeFileSync(join(ROOT, 'bench', 'node.json'), JSON.stringify(results, null, 1) + '\n')
    writeFileSync(join(ROOT, 'bench', 'node.md'), md.trimEnd() + '\n')
    splice(md.trimEnd())
    process.stdout.write(md)
  }
  if (sink === -1) console.log(sink)
}

await main()
