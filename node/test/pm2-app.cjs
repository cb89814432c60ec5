// An app PM2 runs in cluster mode (`instances: 2`): each instance attaches to
// the cache by name, loads one shared key through getOrSet, and records what
// it got under its own PM2 id. PM2 forks them with node's cluster module, so
// this is the CommonJS entry as most PM2 apps load it.
const { Cache } = require('ziggurat')

const name = process.env.ZIGGURAT_TEST_CACHE
const cache = new Cache(name, { size: '8MiB', loaderTimeout: 20 })

async function main() {
  cache.incr('started', 1, { default: 0 })
  // Every instance asks at once: one of them loads, the others wait for it.
  while (cache.get('started') < Number(process.env.INSTANCES)) {
    await new Promise((r) => setTimeout(r, 5))
  }
  const v = await cache.getOrSet('shared', async () => {
    cache.incr('loads', 1, { default: 0 })
    await new Promise((r) => setTimeout(r, 300))
    return { by: process.pid }
  })
  cache.set(`seen:${process.env.pm_id}`, { pid: process.pid, value: v })
  // A PM2 app keeps running until PM2 stops it.
  setInterval(() => {}, 1 << 30)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
