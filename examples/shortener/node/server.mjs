// The shortener served by Node.js workers under the cluster module: the primary forks the
// workers and the workers share the listening socket; each worker opens its own database
// connection and attaches to the host's cache by name (no broker, no primary in between).
//
//   SHORTENER_DATABASE_URL=postgresql://... SHORTENER_CACHE=l1+l2 \
//       node server.mjs --port 8001 --workers 2
//
// Settings: the Python app's environment variables (SHORTENER_CACHE, SHORTENER_CACHE_NAME,
// SHORTENER_CACHE_SIZE, SHORTENER_CACHE_TTL, SHORTENER_L1_ITEMS, SHORTENER_CACHE_DIR,
// SHORTENER_STATS_DIR, and SHORTENER_REDIS_URL with SHORTENER_SECRET for the cluster tier), so
// that Python workers started with the same ones share its cache.

import cluster from 'node:cluster'
import http from 'node:http'
import { parseArgs } from 'node:util'
import { Shortener } from './app.mjs'

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '8001' },
    workers: { type: 'string', default: '2' },
  },
})
const port = Number(values.port)
const workers = Number(values.workers)
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  throw new RangeError(`server.mjs: --port must be a port number, got ${values.port}`)
}
if (!Number.isInteger(workers) || workers < 1) {
  throw new RangeError(`server.mjs: --workers must be a whole number >= 1, got ${values.workers}`)
}

if (cluster.isPrimary) {
  let stopping = false
  for (let i = 0; i < workers; i++) cluster.fork()
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return
    // A worker that dies is not replaced: the supervisor sees the server fail instead.
    console.error(`worker ${worker.process.pid} exited (${signal ?? code}); stopping`)
    stop(1)
  })
  const stop = (code) => {
    stopping = true
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM')
    setTimeout(() => process.exit(code), 3000).unref()
    cluster.disconnect(() => process.exit(code))
  }
  process.on('SIGTERM', () => stop(0))
  process.on('SIGINT', () => stop(0))
} else {
  const app = await Shortener.start(process.env)
  const server = http.createServer((req, res) => app.handle(req, res))
  server.keepAliveTimeout = 5000
  server.listen(port, values.host)
  const stop = () => {
    server.close()
    server.closeAllConnections()
    app.close().finally(() => process.exit(0))
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}
