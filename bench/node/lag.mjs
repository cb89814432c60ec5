// f) The invalidation lag between hosts of two languages: a Node.js host and a Python host
// (bench/node/lag_host.py, a process of its own) of one cache on the run's server, each
// on its own directory. One host sets a key to 1, 2, 3, ... waiting after each write until
// the other host reads the new value; the lag is the time from the write's return to that
// read, both taken on CLOCK_MONOTONIC (Node.js's hrtime and Python's monotonic_ns).
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { Cache } from '../../node/index.js'

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = join(HERE, '..', '..')
const SECRET = 'bench-secret-0123456789abcdef'
const KEY = 'lag:key'
const now = () => process.hrtime.bigint()

function pctl(xs, q) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]
}

/** The Python host: its process, and its stdout's lines as an async iterator. */
async function pythonHost(role, name, directory, url, n) {
  const py = process.env.ZIGGURAT_PYTHON ?? join(ROOT, '.venv', 'bin', 'python')
  const p = spawn(py, [join(HERE, 'lag_host.py'), role, name, directory, url, SECRET, String(n)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]()
  const first = await lines.next()
  if (first.value !== 'ready') throw new Error(`the Python host did not start: ${first.value}`)
  return { p, lines }
}

async function positioned(cache) {
  while (!cache.stats().l3.positioned) await new Promise((r) => setTimeout(r, 5))
}

/** Node.js writes, Python reads: lags in ns. */
async function nodeToPython(url, dir, run, n) {
  mkdirSync(join(dir, 'na'))
  mkdirSync(join(dir, 'pb'))
  const name = `${run}-lag1`
  const a = new Cache(name, { directory: join(dir, 'na'), size: '16MiB', redis: url, secret: SECRET, redisTimeout: 1 })
  await positioned(a)
  const { p, lines } = await pythonHost('reader', name, join(dir, 'pb'), url, n)
  const lags = []
  try {
    for (let i = 1; i <= n; i++) {
      await a.set(KEY, i)
      const written = now()
      for (;;) {
        const { value, done } = await lines.next()
        if (done) throw new Error('the Python host ended')
        const [v, ns] = value.split(' ')
        if (Number(v) >= i) {
          lags.push(Number(BigInt(ns) - written))
          break
        }
      }
      await new Promise((r) => setTimeout(r, Math.random() * 2))
    }
  } finally {
    p.kill()
    a.close()
  }
  return { lags, l3: null }
}

/** Python writes, Node.js reads (spinning on get): lags in ns, and the host's figures. */
async function pythonToNode(url, dir, run, n) {
  mkdirSync(join(dir, 'pa'))
  mkdirSync(join(dir, 'nb'))
  const name = `${run}-lag2`
  const b = new Cache(name, { directory: join(dir, 'nb'), size: '16MiB', redis: url, secret: SECRET, redisTimeout: 1 })
  await positioned(b)
  const { p, lines } = await pythonHost('writer', name, join(dir, 'pa'), url, n)
  const written = new Map()
  const seen = new Map()
  // The writer's lines arrive through the event loop: the spin yields to it now and then.
  ;(async () => {
    for await (const line of { [Symbol.asyncIterator]: () => lines }) {
      const [v, ns] = line.split(' ')
      written.set(Number(v), BigInt(ns))
    }
  })()
  p.stdin.write('go\n')
  let last = 0
  let spins = 0
  const deadline = Date.now() + 60_000 + n * 20
  while (last < n && Date.now() < deadline) {
    const v = await b.get(KEY)
    if (typeof v === 'number' && v > last) {
      seen.set(v, now())
      last = v
      p.stdin.write(`${v}\n`)
    }
    if (++spins % 8 === 0) await new Promise((r) => setImmediate(r))
  }
  while (written.size < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
  const l3 = b.stats().l3
  p.stdin.end()
  await once(p, 'exit')
  b.close()
  const lags = []
  for (const [v, t] of seen) if (written.has(v)) lags.push(Number(t - written.get(v)))
  return { lags, l3 }
}

/** The section: `redis` is the run's server. Returns { goals, md, data }. */
export async function lagSection(redis, S, h, run) {
  const url = `redis://127.0.0.1:${redis.port}/0`
  const n = S.reps > 3 ? 1000 : 200
  const dir = mkdtempSync(join(tmpdir(), 'ziggurat-bench-lag-'))
  const fmt = (ns) => `${(ns / 1e6).toFixed(2)} ms`
  try {
    const runs = {
      'Node.js host writes, Python host reads': await nodeToPython(url, dir, run, n),
      'Python host writes, Node.js host reads': await pythonToNode(url, dir, run, n),
    }
    const rows = Object.entries(runs).map(([label, r]) => [
      label,
      String(r.lags.length),
      fmt(pctl(r.lags, 0.5)),
      fmt(pctl(r.lags, 0.99)),
      fmt(Math.max(...r.lags)),
    ])
    const p99 = Math.max(...Object.values(runs).map((r) => pctl(r.lags, 0.99)))
    const data = Object.fromEntries(
      Object.entries(runs).map(([label, r]) => [label, { p50_ns: pctl(r.lags, 0.5), p99_ns: pctl(r.lags, 0.99), lags_ns: r.lags, l3: r.l3 }]),
    )
    return {
      goals: [['Invalidation lag between a Node.js and a Python host, p99 (worse direction)', fmt(p99), 'p99 ≤ 5 ms', p99 <= 5e6]],
      data: { changes: n, ...data },
      md: [
        '## Node.js f) Cluster tier: invalidation lag between a Node.js host and a Python host',
        '',
        `One host sets a key to 1, 2, ... ${n} (each write awaited), waiting after each until the`,
        'other host reads the new value, then 0–2 ms more; the lag is the time from the write\'s',
        'return to the first read of the new value on the other host (both on CLOCK_MONOTONIC).',
        "Each host's stream reader is a thread of its process; the reading process spins on `get`.",
        '',
        h.table(['direction', 'changes seen', 'p50', 'p99', 'max'], rows),
      ],
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
