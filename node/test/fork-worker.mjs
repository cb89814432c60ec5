// A cluster.fork() worker of cluster-fork.test.mjs: it opens the cache by
// name (racing the others to create it), counts itself in, and waits.
import { Cache } from 'ziggurat'

const cache = new Cache(process.argv[2], { size: '8MiB' })
cache.set(`worker:${process.pid}`, process.pid)
cache.incr('joined')
process.send({ pid: process.pid })
process.on('message', () => {
  cache.close()
  process.disconnect()
})
