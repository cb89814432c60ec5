// The contract suite's Node.js driver: the same commands as driver.py, one JSON
// object a line on stdin, each answered by one line on stdout ({id, ok} or
// {id, error}) in the order they complete; a loader held at a gate holds only
// its own command. The suite's option names are mapped to this front end's.
import { createInterface } from 'node:readline'
import { Cache } from '../../node/index.js'

let cache = null
const gates = new Map()
let loads = 0

const OPTIONS = {
  size: 'size',
  ttl: 'ttl',
  neg_ttl: 'negTtl',
  stale_ttl: 'staleTtl',
  loader_timeout: 'loaderTimeout',
  directory: 'directory',
  degraded: 'degraded',
  l1_items: 'l1Items',
  lock_timeout: 'lockTimeout',
  redis: 'redis',
  secret: 'secret',
  redis_timeout: 'redisTimeout',
  stream_length: 'streamLength',
  cluster_single_flight: 'clusterSingleFlight',
}

function say(msg) {
  process.stdout.write(`${JSON.stringify(msg)}\n`)
}

function gate(name) {
  let g = gates.get(name)
  if (g === undefined) {
    let open
    const opened = new Promise((resolve) => {
      open = resolve
    })
    g = { opened, open }
    gates.set(name, g)
  }
  return g
}

// CLOCK_MONOTONIC, as every driver reads it: histories of several processes compare.
const now = () => Number(process.hrtime.bigint())
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const orNull = (v) => (v === undefined ? null : v)

function c() {
  if (cache === null) throw new Error('open first')
  return cache
}

async function fetch(cmd) {
  let loaded = false
  const options = {}
  if (cmd.ttl !== undefined) options.ttl = cmd.ttl
  if (cmd.neg_ttl !== undefined) options.negTtl = cmd.neg_ttl
  if (cmd.stale_ttl !== undefined) options.staleTtl = cmd.stale_ttl
  if (cmd.tags !== undefined) options.tags = cmd.tags
  const v = await c().getOrSet(
    cmd.key,
    async (ctx) => {
      loaded = true
      loads += 1
      if (cmd.gate !== undefined) {
        say({ event: 'loading', gate: cmd.gate })
        const timeout = sleep(30000).then(() => {
          throw new Error(`gate ${cmd.gate} never opened`)
        })
        await Promise.race([gate(cmd.gate).opened, timeout])
      }
      if (cmd.ms) await sleep(cmd.ms)
      if (cmd.fail) throw new Error('the loader failed')
      // What the loader says of its result once it knows it (its context).
      if (cmd.said_tags !== undefined) ctx.setTags(cmd.said_tags)
      if (cmd.said_ttl !== undefined) ctx.setTtl(cmd.said_ttl)
      if (cmd.skip) ctx.skip()
      return cmd.value ?? null
    },
    options,
  )
  return { value: orNull(v), loaded }
}

// A seeded generator, so that a failing mix can be run again.
function rng(seed) {
  let s = seed >>> 0 || 1
  return () => {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    return (s >>> 0) / 2 ** 32
  }
}

async function mix(cmd) {
  const r = rng(cmd.seed)
  const pick = (xs) => xs[Math.floor(r() * xs.length)]
  const ops = [
    ['set', 30],
    ['get', 45],
    ['delete', 8],
    ['invalidate', 5],
    ['set_tagged', 7],
    ['fetch', 5],
    ['clear', cmd.clears ?? 0],
  ]
  const total = ops.reduce((a, [, w]) => a + w, 0)
  const out = []
  const ca = c()
  for (let i = 0; i < cmd.n; i++) {
    let x = r() * total
    let op = ops[0][0]
    for (const [name, w] of ops) {
      if (x < w) {
        op = name
        break
      }
      x -= w
    }
    let key = pick(cmd.keys)
    const val = `${cmd.me}:${i}`
    const t0 = now()
    let res = null
    let arg = null
    if (op === 'set') {
      await ca.set(key, val)
      arg = val
    } else if (op === 'set_tagged') {
      const tag = pick(cmd.tags)
      await ca.set(key, val, { tags: [tag] })
      arg = [val, tag]
    } else if (op === 'get') {
      res = orNull(await ca.get(key))
    } else if (op === 'delete') {
      res = await ca.delete(key)
    } else if (op === 'invalidate') {
      key = pick(cmd.tags)
      await ca.invalidateTags(key)
    } else if (op === 'clear') {
      await ca.clear()
    } else {
      res = orNull(await ca.getOrSet(key, async () => val))
      arg = val
    }
    out.push([op, key, arg, res, t0, now()])
  }
  return out
}

async function run(cmd) {
  switch (cmd.op) {
    case 'open': {
      const options = {}
      for (const [k, v] of Object.entries(cmd.options ?? {})) options[OPTIONS[k]] = v
      cache = new Cache(cmd.name, options)
      return { pid: process.pid, degraded: cache.stats().degraded !== null }
    }
    case 'set': {
      const options = {}
      if (cmd.ttl !== undefined) options.ttl = cmd.ttl
      if (cmd.tags !== undefined) options.tags = cmd.tags
      await c().set(cmd.key, cmd.value, options)
      return null
    }
    case 'get':
      return orNull(await c().get(cmd.key))
    case 'get2':
      await c().get(cmd.key)
      return orNull(await c().get(cmd.key))
    case 'delete':
      return await c().delete(cmd.key)
    case 'add':
      return await c().add(cmd.key, cmd.value, cmd.ttl === undefined ? undefined : { ttl: cmd.ttl })
    case 'incr':
      return await c().incr(cmd.key, cmd.delta ?? 1, cmd.default === undefined ? undefined : { default: cmd.default })
    case 'incr_many':
      for (let i = 0; i < cmd.n; i++) await c().incr(cmd.key, 1, { default: 0 })
      return null
    case 'touch':
      return await c().touch(cmd.key, { ttl: cmd.ttl })
    case 'invalidate':
      await c().invalidateTags(...cmd.tags)
      return null
    case 'clear':
      await c().clear()
      return null
    case 'fetch':
      return await fetch(cmd)
    case 'release':
      gate(cmd.gate).open()
      return null
    case 'loads':
      return loads
    case 'burst': {
      let last = null
      for (let i = 0; i < cmd.n; i++) {
        last = `${cmd.prefix}:${i}`
        await c().set(cmd.key, last)
      }
      return last
    }
    case 'write_then_read':
      await c().set(cmd.other, cmd.value)
      await c().set(cmd.key, cmd.value)
      return orNull(await c().get(cmd.key))
    case 'mix':
      return await mix(cmd)
    case 'sets_forever': {
      // Writes until killed: values that tell their own length, so a torn one shows.
      for (let i = 0; ; i++) {
        const n = 1 + ((i * 7919) % 3000)
        await c().set(cmd.key, { n, pad: 'x'.repeat(n) })
        if (i % 64 === 0) await new Promise((r) => setImmediate(r))
      }
    }
    case 'stats':
      return c().stats()
    case 'l3': {
      // The tier's figures, in the suite's (snake_case) names.
      const out = {}
      for (const [k, v] of Object.entries(c().stats().l3)) out[k.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`)] = v
      return out
    }
    default:
      throw new Error(`unknown op ${cmd.op}`)
  }
}

async function serve(cmd) {
  try {
    say({ id: cmd.id, ok: await run(cmd) })
  } catch (e) {
    say({ id: cmd.id, error: { type: e.name, message: e.message } })
  }
}

say({ ready: process.pid, language: 'node' })
const rl = createInterface({ input: process.stdin })
for await (const line of rl) {
  const cmd = JSON.parse(line)
  if (cmd.op === 'exit') break
  serve(cmd)
}
process.exit(0)
