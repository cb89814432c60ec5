// The cache-tests.fyi suite's proxy for the Node.js front end (bench/conformance.py
// --front node): a reverse proxy to the suite's origin behind ziggurat/http, on two
// cluster workers, as the Python run puts the WSGI middleware on two gunicorn workers.
// argv: the port to listen on, the origin (host:port), the cache's name.
import cluster from 'node:cluster'
import http from 'node:http'
import { Cache } from '../../node/index.js'
import { HttpCache } from '../../node/http.js'

const [port, origin, name] = process.argv.slice(2)
const [originHost, originPort] = origin.split(':')
// Hop-by-hop fields: not forwarded. Connection goes up to the cache, so that its rule
// for the fields Connection lists is what the suite measures.
const HOP = new Set(['keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade'])

if (cluster.isPrimary) {
  for (let i = 0; i < 2; i++) cluster.fork()
  const stop = () => {
    for (const w of Object.values(cluster.workers)) w.kill()
    const c = new Cache(name, { size: '64MiB' })
    c.unlink()
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
} else {
  let current = ''
  process.on('uncaughtException', (e) => {
    console.error(`proxy worker failed during ${current}: ${e.stack}`)
    process.exit(1)
  })
  const proxy = (req, res) => {
    current = `${req.headers['test-id']} #${req.headers['req-num']}`
    let answered = false
    const headers = {}
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const k = req.rawHeaders[i].toLowerCase()
      if (HOP.has(k) || k === 'connection' || k === 'host') continue
      headers[k] = headers[k] === undefined ? req.rawHeaders[i + 1] : `${headers[k]}, ${req.rawHeaders[i + 1]}`
    }
    // A connection per request and the lenient parser, as Python's http.client reads:
    // some of the suite's origins answer what the strict parser refuses.
    const opts = { host: originHost, port: originPort, method: req.method, path: req.url, headers, insecureHTTPParser: true, agent: false }
    let responded = false
    const up = http.request(opts, (o) => {
      responded = true
      const chunks = []
      o.on('data', (c) => chunks.push(c))
      o.on('end', () => {
        const body = Buffer.concat(chunks)
        const lines = []
        for (let i = 0; i < o.rawHeaders.length; i += 2) {
          const k = o.rawHeaders[i].toLowerCase()
          if (HOP.has(k) || k === 'content-length') continue
          lines.push(o.rawHeaders[i], o.rawHeaders[i + 1])
        }
        lines.push('Content-Length', String(body.length))
        if (answered) return
        answered = true
        res.writeHead(o.statusCode, o.statusMessage, lines)
        res.end(body)
      })
    })
    // What a reverse proxy answers when the origin fails (once: a response cut short
    // may end after its error).
    up.on('error', () => {
      // An error after a whole response (bytes past its Content-Length) leaves it as read.
      if (answered || responded) return
      answered = true
      res.writeHead(502, { 'content-length': '0' })
      res.end()
    })
    req.pipe(up)
  }
  const pages = new HttpCache(new Cache(name, { size: '64MiB' }), {
    allowedHosts: ['localhost', '127.0.0.1'],
    surrogateControl: true,
    onWarning: () => {},
  })
  http.createServer(pages.handler(proxy)).listen(Number(port), '127.0.0.1')
}
