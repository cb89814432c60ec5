// One of the four cluster.fork() workers of the miss-herd benchmark: on each
// message it asks its backend for the key named, with a loader that takes
// `loaderMs` (a database query), and answers with the wall-clock time it got
// the value and how many times its own loader ran.
import { BentoCache, bentostore } from 'bentocache'
import { memoryDriver } from 'bentocache/drivers/memory'
import { redisDriver } from 'bentocache/drivers/redis'
import { Cache } from '../../node/index.js'

const { HERD_CACHE, REDIS_PORT } = process.env
const cache = new Cache(HERD_CACHE)
const stores = { memory: bentostore().useL1Layer(memoryDriver({ maxItems: 10_000 })) }
if (REDIS_PORT) {
  stores.redis = bentostore()
    .useL1Layer(memoryDriver({ maxItems: 10_000 }))
    .useL2Layer(redisDriver({ connection: { host: '127.0.0.1', port: Number(REDIS_PORT) } }))
}
const bento = new BentoCache({ default: 'memory', stores })

const now = () => performance.timeOrigin + performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

process.on('message', async (m) => {
  if (m.stop) {
    cache.close()
    await bento.disconnectAll()
    process.disconnect()
    return
  }
  let loads = 0
  const loader = async () => {
    loads++
    await sleep(m.loaderMs)
    return { id: 1, name: 'Ada Lovelace', roles: ['admin'] }
  }
  let v
  if (m.backend === 'ziggurat') {
    v = await cache.getOrSet(m.key, loader, { ttl: 300 })
  } else {
    v = await bento.use(m.backend).getOrSet({ key: m.key, factory: loader, ttl: '5m' })
  }
  process.send({ done: now(), loads, ok: v?.name === 'Ada Lovelace' })
})
process.send({ ready: true })
