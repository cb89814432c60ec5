// A Node.js worker process the tests drive over stdin/stdout, one JSON
// command per line, one JSON answer per line: it opens the cache named on
// its command line and does what it is told (set, get, getOrSet...).
import { createInterface } from 'node:readline'
import { Cache } from 'ziggurat'

const [name, size] = process.argv.slice(2)
const cache = new Cache(name, { size: size ?? '16MiB', loaderTimeout: 20 })
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function out(v) {
  process.stdout.write(`${JSON.stringify(v)}\n`)
}

async function run(c) {
  switch (c.op) {
    case 'set':
      cache.set(c.key, c.value, c.ttl === undefined ? undefined : { ttl: c.ttl })
      return true
    case 'get': {
      const v = cache.get(c.key)
      return v === undefined ? null : v
    }
    case 'get2': {
      // Twice: the second read is answered by L1.
      cache.get(c.key)
      const v = cache.get(c.key)
      return v === undefined ? null : v
    }
    case 'getOrSet':
      return await cache.getOrSet(c.key, async () => {
        cache.incr(`loads:${c.key}`)
        await sleep(c.ms)
        return c.value
      })
    case 'incr':
      return cache.incr(c.key, c.delta ?? 1)
    case 'add':
      return cache.add(c.key, c.value)
    case 'invalidate':
      cache.invalidateTags(...c.tags)
      return true
    case 'clear':
      cache.clear()
      return true
    case 'setTagged':
      cache.set(c.key, c.value, { tags: c.tags })
      return true
    case 'nsSet':
      cache.namespace(c.ns).set(c.key, c.value)
      return true
    case 'nsGet': {
      const v = cache.namespace(c.ns).get(c.key)
      return v === undefined ? null : v
    }
    case 'nsClear':
      cache.namespace(c.ns).clear()
      return true
    case 'stats':
      return cache.stats()
    default:
      throw new Error(`unknown op ${c.op}`)
  }
}

const rl = createInterface({ input: process.stdin })
out({ ready: process.pid })
for await (const line of rl) {
  const c = JSON.parse(line)
  try {
    out({ id: c.id, ok: await run(c) })
  } catch (e) {
    out({ id: c.id, error: `${e.name}: ${e.message}` })
  }
}
