// A private redis-server on 127.0.0.1 for the benchmarks that need one: a
// free port, no persistence, stopped by the run.
import { spawn } from 'node:child_process'
import { createServer, connect } from 'node:net'

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

function answers(port) {
  return new Promise((resolve) => {
    const c = connect(port, '127.0.0.1')
    c.once('connect', () => {
      c.write('PING\r\n')
    })
    c.once('data', (d) => {
      c.destroy()
      resolve(d.toString().startsWith('+PONG'))
    })
    c.once('error', () => resolve(false))
  })
}

/** Starts redis-server; resolves to { port, version, stop() }. */
export async function startRedis(bin = 'redis-server') {
  const port = await freePort()
  const p = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  p.stdout.on('data', (d) => {
    out += d
  })
  const deadline = Date.now() + 10_000
  while (!(await answers(port))) {
    if (p.exitCode !== null || Date.now() > deadline) {
      p.kill()
      throw new Error(`redis-server did not start on port ${port}: ${out.slice(-500)}`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  const m = /v(?:ersion)?=(\d+\.\d+\.\d+)/.exec(out)
  return {
    port,
    version: m ? m[1] : 'unknown',
    stop: () =>
      new Promise((resolve) => {
        if (p.exitCode !== null) return resolve()
        p.once('exit', () => resolve())
        p.kill('SIGTERM')
      }),
  }
}
