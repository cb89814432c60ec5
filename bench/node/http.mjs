// The HTTP hit path of ziggurat/http (docs/benchmarks.md, "Node.js HTTP response cache"):
// requests per second of a cached page against the bare app returning the same bytes
// (node:http, Express, Fastify), and against the peers on the same Express app: apicache
// (a per-process page cache) and a page cache on Redis. One server process, wrk with one
// thread and 32 connections; rounds interleave the kinds, and the medians are reported
// with their ratios, each measured in the same run.
//
//     node bench/node/http.mjs [--rounds 7] [--seconds 3]
import { spawn, execFileSync } from 'node:child_process'
import { createInterface } from 'node:readline'
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Cache } from '../../node/index.js'
import { startRedis } from './redis.mjs'
import { median } from './timing.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const arg = (name, d) => {
  const i = process.argv.indexOf(name)
  return i < 0 ? d : Number(process.argv[i + 1])
}
const ROUNDS = arg('--rounds', 7)
const SECONDS = arg('--seconds', 3)
const KINDS = ['node', 'node-zig', 'express', 'express-zig', 'express-apicache', 'express-redis', 'fastify', 'fastify-zig']

function wrk(port, seconds) {
  const out = execFileSync('wrk', ['-t1', '-c32', `-d${seconds}s`, '--latency', `http://127.0.0.1:${port}/page`], { encoding: 'utf8' })
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1])
  const p99 = /99%\s+([\d.]+)(us|ms|s)/.exec(out)
  const ms = p99 ? Number(p99[1]) * { us: 0.001, ms: 1, s: 1000 }[p99[2]] : NaN
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out)
  if (errors) throw new Error(`${errors[1]} failed responses`)
  return { rps, p99: ms }
}

async function server(kind, name, redisPort) {
  const child = spawn(process.execPath, [join(HERE, 'http-server.mjs'), kind, name, String(redisPort)], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', (l) => resolve(JSON.parse(l).port))
    child.once('exit', (code) => reject(new Error(`${kind} exited (${code})`)))
  })
  return { port, stop: () => new Promise((r) => (child.once('exit', r), child.kill())) }
}

const redis = await startRedis()
const name = `bench-http-${process.pid}`
const runs = Object.fromEntries(KINDS.map((k) => [k, []]))
try {
  for (let round = 0; round < ROUNDS; round++) {
    // Each round in another order, so that no kind always runs first or last.
    const order = KINDS.map((k, i) => KINDS[(i + round) % KINDS.length])
    for (const kind of order) {
      const s = await server(kind, name, redis.port)
      wrk(s.port, 1) // warm: the page is stored, the JIT has run
      runs[kind].push(wrk(s.port, SECONDS))
      await s.stop()
    }
  }
} finally {
  await redis.stop()
  const c = new Cache(name, { size: '64MiB' })
  c.unlink()
}
const med = Object.fromEntries(KINDS.map((k) => [k, { rps: median(runs[k].map((r) => r.rps)), p99: median(runs[k].map((r) => r.p99)) }]))
// A ratio is the median of the rounds' ratios (each round runs both kinds minutes apart at
// most), with their min–max: on a shared machine a round's load moves both.
const ratio = (a, b) => {
  const per = runs[a].map((r, i) => r.rps / runs[b][i].rps).sort((x, y) => x - y)
  return { median: median(per), min: per[0], max: per.at(-1) }
}
const ratios = {
  'node:http cached / bare': ratio('node-zig', 'node'),
  'Express cached / bare': ratio('express-zig', 'express'),
  'Fastify cached / bare': ratio('fastify-zig', 'fastify'),
  'Express: ziggurat / apicache': ratio('express-zig', 'express-apicache'),
  'Express: ziggurat / Redis page cache': ratio('express-zig', 'express-redis'),
}
const lines = [
  `node ${process.version}, ${ROUNDS} rounds of ${SECONDS} s per kind, wrk -t1 -c32, one server process, 8 KiB page; Redis ${redis.version}.`,
  '',
  '| server | req/s (median) | runs | p99 ms (median) |',
  '|---|---:|---|---:|',
  ...KINDS.map((k) => `| ${k} | ${Math.round(med[k].rps)} | ${runs[k].map((r) => Math.round(r.rps)).join(', ')} | ${med[k].p99.toFixed(2)} |`),
  '',
  '| ratio (median of the rounds) | value | rounds min–max |',
  '|---|---:|---|',
  ...Object.entries(ratios).map(([k, v]) => `| ${k} | ${v.median.toFixed(2)} | ${v.min.toFixed(2)}–${v.max.toFixed(2)} |`),
]
writeFileSync(join(HERE, '..', 'node-http.json'), `${JSON.stringify({ runs, medians: med, ratios }, null, 1)}\n`)
writeFileSync(join(HERE, '..', 'node-http.md'), `${lines.join('\n')}\n`)
console.log(lines.join('\n'))
