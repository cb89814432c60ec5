// A node:http server behind ziggurat/http on cache argv[2], for the tests of
// several processes: it prints {"port"} once listening, and a line
// {"call": url} each time the app runs. The app answers after argv[3] ms
// (default 0) with "node <pid> <n>", max-age=60 and the tag "posts"; a URL
// under /slow/ takes 10 s.
import http from 'node:http'
import { Cache } from 'ziggurat'
import { HttpCache } from 'ziggurat/http'

const cache = new Cache(process.argv[2], { size: '16MiB' })
const pages = new HttpCache(cache, { allowedHosts: ['site.test'], purgeToken: 'a-purge-token-of-16+' })
const delay = Number(process.argv[3] ?? 0)
let n = 0
const app = (req, res) => {
  n++
  process.stdout.write(`${JSON.stringify({ call: req.url })}\n`)
  const wait = req.url.startsWith('/slow/') ? 10_000 : delay
  setTimeout(() => {
    res.setHeader('cache-control', 'max-age=60')
    res.setHeader('cache-tag', 'posts')
    res.setHeader('content-type', 'text/plain')
    res.end(`node ${process.pid} ${n}`)
  }, wait)
}
const server = http.createServer(pages.handler(app))
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`)
})
