// The Next.js example as 4 `next start` instances on one host, once per cache mode:
//
// - default: Next.js's own cache, per instance (memory, and files under .next);
// - redis: @fortedigital/nextjs-cache-handler on a private redis-server;
// - ziggurat: `withZiggurat` in next.config.mjs, one cache for the host.
//
// For each: the renders of a page that every instance misses at once, the stale
// answers right after a revalidateTag() through one instance (each instance read at
// once), and requests per second and p99 of a cached page under wrk (when wrk is
// installed): one instance of each mode stays up, and wrk runs on each in turn, `--reps`
// times (medians, with the spread). `node demo.mjs [--seconds 5] [--reps 5]
// [--modes default,redis,ziggurat]`; `make demo-next` builds the app first. It prints a
// table, and one JSON line for the tests.
import { spawn, execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import http from 'node:http'
import { readFileSync, rmSync, existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Cache } from 'ziggurat'

const HERE = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const arg = (name, d) => {
  const i = process.argv.indexOf(name)
  return i < 0 ? d : process.argv[i + 1]
}
const SECONDS = Number(arg('--seconds', 5))
const MODES = arg('--modes', 'default,redis,ziggurat').split(',')
const INSTANCES = 4
const ROUNDS = Number(arg('--rounds', 5))
const REPS = Number(arg('--reps', 5))

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
function get(port, path, method = 'GET') {
  return new Promise((resolve, reject) => {
    const q = http.request({ host: '127.0.0.1', port, path, method, agent: false }, (r) => {
      let b = ''
      r.on('data', (c) => (b += c))
      r.on('end', () => resolve({ status: r.statusCode, body: b, headers: r.headers }))
    })
    q.on('error', reject)
    q.end()
  })
}
const versionOf = (body) => Number((/version (?:<!-- -->)?(\d+)/.exec(body) ?? [])[1])

function freePort() {
  return new Promise((resolve) => {
    const s = http.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

function wrk(port, path, seconds) {
  try {
    const out = execFileSync('wrk', ['-t1', '-c16', `-d${seconds}s`, '--latency', `http://127.0.0.1:${port}${path}`], { encoding: 'utf8' })
    const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out)
    return {
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]),
      p99: p99 ? Number(p99[1]) * { us: 0.001, ms: 1, s: 1000 }[p99[2]] : NaN,
    }
  } catch {
    return null // wrk is not installed
  }
}

/** A private redis-server for the 'redis' mode: { url, stop }, or null without one. */
async function startRedis() {
  const port = await freePort()
  let p
  try {
    p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  } catch {
    return null
  }
  const failed = new Promise((r) => p.once('error', () => r(true)))
  for (let i = 0; i < 50; i++) {
    if (await Promise.race([failed, sleep(50).then(() => false)])) return null
    try {
      await new Promise((resolve, reject) => {
        const s = require('node:net').connect(port, '127.0.0.1', () => (s.end(), resolve()))
        s.once('error', reject)
      })
      return { url: `redis://127.0.0.1:${port}`, stop: () => p.kill() }
    } catch {}
  }
  p.kill()
  return null
}

async function runMode(mode) {
  const redis = mode === 'redis' ? await startRedis() : null
  if (mode === 'redis' && redis === null) return { mode, skipped: 'redis-server is not installed' }
  // The data service the pages fetch from: each post has a version the demo moves on.
  const versions = new Map()
  const data = http
    .createServer((req, res) => {
      const id = req.url.split('/').pop()
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ id, title: `Post ${id}`, version: versions.get(id) ?? 1 }))
    })
    .listen(0, '127.0.0.1')
  await new Promise((r) => data.once('listening', r))
  const log = join(HERE, `.renders-${process.pid}.log`)
  rmSync(log, { force: true })
  // Next.js's own cache keeps the pages it renders and its fetch results under .next
  // (server/route-cache, cache/fetch-cache): start each run from the build's.
  rmSync(join(HERE, '.next', 'server', 'route-cache'), { recursive: true, force: true })
  rmSync(join(HERE, '.next', 'cache', 'fetch-cache'), { recursive: true, force: true })
  const cacheName = `next-demo-${process.pid}-${Date.now()}`
  const env = {
    ...process.env,
    DATA_URL: `http://127.0.0.1:${data.address().port}`,
    RENDER_LOG: log,
    NEXT_CACHE: mode,
    REDIS_URL: redis?.url ?? '',
    ZIGGURAT_NEXT_CACHE: cacheName,
    NEXT_TELEMETRY_DISABLED: '1',
  }
  const ports = []
  for (let i = 0; i < INSTANCES; i++) ports.push(await freePort())
  const procs = ports.map((p) =>
    spawn(join(HERE, 'node_modules', '.bin', 'next'), ['start', '-p', String(p), '-H', '127.0.0.1'], { cwd: HERE, env, stdio: ['ignore', 'ignore', 'inherit'] }),
  )
  const renders = (path) => {
    if (!existsSync(log)) return 0
    return readFileSync(log, 'utf8').split('\n').filter((l) => l.endsWith(` ${path}`)).length
  }
  try {
    for (const p of ports) {
      for (let i = 0; ; i++) {
        try {
          if ((await get(p, '/api/revalidate?tag=warmup', 'POST')).status === 200) break
        } catch {}
        if (i > 300) throw new Error(`next start on ${p} did not come up`)
        await sleep(100)
      }
    }
    const result = { mode, missRenders: [], stale: 0, reads: 0 }
    for (let r = 0; r < ROUNDS; r++) {
      const path = `/posts/${r + 1}`
      // Every instance misses the page at once (two requests each).
      await Promise.all(ports.flatMap((p) => [get(p, path), get(p, path)]))
      result.missRenders.push(renders(path))
      // Every instance reads it once more (it is in each one's cache now).
      await Promise.all(ports.map((p) => get(p, path)))
      // The post changes; revalidateTag through one instance; at once, every instance.
      versions.set(String(r + 1), 2)
      await get(ports[r % INSTANCES], `/api/revalidate?tag=post:${r + 1}`, 'POST')
      const after = await Promise.all(ports.map((p) => get(p, path)))
      for (const a of after) {
        result.reads++
        if (versionOf(a.body) !== 2) result.stale++
      }
    }
    // One instance stays up for the load runs, which take the modes in turn.
    for (const p of procs.slice(1)) p.kill()
    result.port = ports[0]
    kept.push(stop)
    return result
  } catch (e) {
    stop()
    throw e
  }

  function stop() {
    for (const p of procs) p.kill()
    redis?.stop()
    data.close()
    rmSync(log, { force: true })
    if (mode === 'ziggurat') {
      try {
        new Cache(cacheName, { size: '128MiB' }).unlink()
      } catch {}
    }
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const kept = []
const results = []
try {
  for (const mode of MODES) results.push(await runMode(mode))
  const live = results.filter((r) => !r.skipped)
  const runs = new Map(live.map((r) => [r.mode, []]))
  for (let rep = 0; rep < REPS; rep++) {
    for (const r of live) {
      const load = wrk(r.port, '/posts/1', SECONDS)
      if (load) runs.get(r.mode).push(load)
    }
  }
  for (const r of live) {
    const loads = runs.get(r.mode)
    r.rps = loads.length ? median(loads.map((l) => l.rps)) : null
    r.rpsRange = loads.length ? [Math.min(...loads.map((l) => l.rps)), Math.max(...loads.map((l) => l.rps))] : null
    r.p99 = loads.length ? median(loads.map((l) => l.p99)) : null
    delete r.port
  }
} finally {
  for (const stop of kept) stop()
}
const title = { default: "Next.js's own cache", redis: '@fortedigital/nextjs-cache-handler, Redis', ziggurat: 'ziggurat' }
console.log(`Next.js example, ${INSTANCES} next start instances on one host, ${ROUNDS} pages; wrk -t1 -c16 -d${SECONDS}s on one instance per mode, ${REPS} runs each in turn (median, min–max):`)
console.log('| mode | renders per page, all instances missing at once | stale right after revalidateTag | req/s (cached page) | p99 ms |')
console.log('|---|---|---:|---:|---:|')
for (const r of results) {
  if (r.skipped) {
    console.log(`| ${title[r.mode]} | ${r.skipped} | | | |`)
    continue
  }
  const rps = r.rps === null ? 'no wrk' : `${Math.round(r.rps)} (${r.rpsRange.map(Math.round).join('–')})`
  const p99 = r.p99 === null ? '-' : r.p99.toFixed(1)
  console.log(`| ${title[r.mode]} | ${r.missRenders.join(', ')} | ${r.stale} of ${r.reads} | ${rps} | ${p99} |`)
}
console.log(JSON.stringify({ results }))
process.exit(0)
