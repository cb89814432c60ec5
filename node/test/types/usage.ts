// Checked by `tsc --noEmit` (test/types.test.mjs): the README's calls type-check,
// and wrong calls do not.
import z, { Cache, LoadTimeoutError, type Stats } from 'ziggurat'
import KeyvDefault from 'ziggurat/keyv'
import { KeyvZiggurat } from 'ziggurat/keyv'
import { collectMetrics } from 'ziggurat/metrics'

const cache = new Cache('blog', { size: '256MiB', l1Items: 10_000, ttl: '5m' })
cache.set('post:1', { title: 'Hello' }, { ttl: 60, tags: ['posts'] })
const post = cache.get<{ title: string }>('post:1')
const title: string | undefined = post?.title
async function main(): Promise<void> {
  const p = await cache.getOrSet('post:2', async ({ signal }) => ({ id: 2, aborted: signal.aborted }), {
    ttl: '10m',
    tags: ['posts'],
  })
  const n: number | undefined = p?.id
  void n
}
cache.delete('post:1')
cache.has('post:1')
cache.invalidateTags('posts')
cache.clear()
cache.add('job:7', process.pid, { ttl: 30 })
cache.incr('visits')
cache.touch('post:2', { ttl: Infinity })
const posts = cache.namespace('posts')
posts.set('1', Buffer.from('x'))
const s: Stats = cache.stats()
cache.close()

// A cache joined to the cluster tier: its reads after L1 and its writes are promises.
const joined = new Cache('shop', { redis: 'redis://10.0.0.5:6379/0', secret: 'a-secret-of-enough-bytes' })
async function clustered(): Promise<void> {
  const price: number | undefined = (await joined.get<{ price: number }>('product:7'))?.price
  await joined.set('product:7', { price: 12.5 }, { tags: ['products'] })
  const added: boolean = await joined.add('job:7', 1)
  const count: number | bigint = await joined.incr('visits')
  const many: Map<string | Buffer | Uint8Array, number> = await joined.getMany<number>(['a', 'b'])
  await joined.invalidateTags('products')
  const nsGot: unknown = await joined.namespace('p').get('1')
  const lag: number | undefined = joined.stats().l3?.lagP99Ms
  void price, added, count, many, nsGot, lag
}
void clustered
// @ts-expect-error a joined cache's get is a promise, not the value
const notAwaited: { price: number } | undefined = joined.get<{ price: number }>('product:7')
// @ts-expect-error without redis, add returns the boolean itself
const notAPromise: Promise<boolean> = new Cache('plain').add('k', 1)
void notAwaited, notAPromise
void [title, main, s, LoadTimeoutError]

// A Date is stored as JSON.stringify writes it; a Map is not data.
cache.set('k', new Date())
// @ts-expect-error a Map is not a Value
cache.set('k', new Map())
// @ts-expect-error options are checked
cache.set('k', 1, { tll: 5 })
// @ts-expect-error a key is a string or bytes
cache.get(42)

// The subpath entries' types, through their ES module declarations.
const keyv = new KeyvZiggurat(cache)
void [keyv, collectMetrics, new z.Cache('default-export'), new KeyvDefault(cache)]
// @ts-expect-error the Keyv store takes a Cache or a name
void new KeyvZiggurat(42)

// serializer: 'msgpack' takes Dates and BigInts inside values; 'auto' does not.
const packed = new Cache('events', { serializer: 'msgpack', l1NegativeItems: 100 })
packed.set('event', { at: new Date(), id: 2n ** 60n, body: Buffer.from('x') })
packed.namespace('e').set('1', new Date())
packed.setMany({ at: new Date() })
const when: Date | undefined = packed.getMany<Date>(['at']).get('at')
void when
// @ts-expect-error an 'auto' cache's setMany takes no Set
cache.setMany({ at: new Set() })
const negatives: number = packed.stats().l1.negativeItems
void negatives
// @ts-expect-error an 'auto' cache does not store bytes inside a value
cache.set('k', { at: Buffer.from('x') })
cache.set('k', { at: new Date(), gone: undefined })
// @ts-expect-error undefined is no value
cache.set('k', undefined)
// @ts-expect-error serializer is 'auto' or 'msgpack'
void new Cache('x', { serializer: 'pickle' })
void new Cache('x', { copy: 'decode' })
// @ts-expect-error copy is 'shared', 'copy' or 'decode'
void new Cache('x', { copy: 'deep' })
// Many keys at once, decr and memoize.
const many: Map<string | Uint8Array, { title: string }> = cache.getMany<{ title: string }>(['post:1', 'post:2'])
cache.setMany({ a: 1, b: 'two' }, { ttl: 60, tags: ['t'] })
cache.setMany(new Map([['a', 1]]))
cache.setMany([['a', [1, 2]] as const])
const removed: number = cache.deleteMany(new Set(['a', 'b']))
cache.decr('stock', 2n, { default: 10 })
posts.setMany({ 1: 'x' })
const user = cache.memoize(async (id: number) => ({ id }), { name: 'user', ttl: '10m', tags: (id) => [`user:${id}`] })
async function useUser(): Promise<void> {
  const u = await user(5)
  const id: number | undefined = u?.id
  const k: string = user.key(5)
  const gone: boolean = user.invalidate(5)
  void [id, k, gone]
}
void [many, removed, useUser, new Cache('opts', { refreshAhead: 0.2, recreate: true, group: 'www-data', version: 3 })]
// @ts-expect-error a memoized function takes its function's arguments
void user('5')
// @ts-expect-error memoize's options are checked
cache.memoize(async () => 1, { tll: 5 })
// @ts-expect-error refreshAhead is a fraction
void new Cache('opts', { refreshAhead: '20%' })

// Values typed by an interface, with readonly arrays and optional properties.
interface Post {
  id: number
  title: string
  tags: readonly string[]
  summary?: string
  author: { name: string }
}
declare function dbGetPost(id: string): Promise<Post | null>
async function interfaces(): Promise<void> {
  const p: Post | undefined = await cache.getOrSet('post:9', () => dbGetPost('9'), { tags: 'posts' })
  if (p !== undefined) cache.set('post:9', p, { tags: p.tags })
  cache.add('post:10', { id: 10, title: 't', tags: [], author: { name: 'a' } } satisfies Post)
  cache.setMany(new Map<string, Post>())
  const getPost = cache.memoize((id: string) => dbGetPost(id), { name: 'post', tags: (id) => `post:${id}` })
  const q: Post | undefined = await getPost('9')
  cache.invalidateTags(['posts', 'users'] as const)
  cache.incr('n', 1, { tags: 'counters' })
  void q
}
void interfaces
interface WithDate {
  at: Date
  bytes: Uint8Array
}
interface WithMethod {
  id: number
  f(): void
}
declare const dated: WithDate
declare const method: WithMethod
// @ts-expect-error an 'auto' cache does not store bytes inside an interface's value
cache.set('k', dated)
// @ts-expect-error a function is not data
cache.set('k', method)
// @ts-expect-error a Map is not data
cache.set('k', new Map([['a', 1]]))
packed.set('k', dated)

// `using` closes the cache as its block ends; warnings may go to the app's logger.
function scoped(): void {
  using jobs = new Cache('jobs', { onWarning: (w: Error) => console.warn(w.message) })
  jobs.set('a', 1)
}
void scoped
// @ts-expect-error onWarning takes a function
new Cache('jobs', { onWarning: 'log' })

// ziggurat/http: the HTTP response cache on a Cache, with its adapters.
import http from 'node:http'
import { HttpCache, type HttpCacheOptions } from 'ziggurat/http'
import DefaultHttpCache from 'ziggurat/http'
const hosts: readonly string[] = ['example.com']
const httpOptions: HttpCacheOptions = { allowedHosts: hosts, maxBody: 65536, purgeToken: null, appTimeout: 2 }
const pages = new HttpCache(cache, httpOptions)
http.createServer(pages.handler((req, res) => res.end(req.url)))
const edge: (r: Request) => Promise<Response> = pages.fetch(async (r: Request) => new Response(r.url))
void edge
const purged: boolean = pages.purge('https://example.com/')
pages.invalidateTags('posts', ['a', 'b'])
void purged
void new DefaultHttpCache(cache)
// @ts-expect-error maxBody is a number of bytes
new HttpCache(cache, { maxBody: '1MiB' })

// ziggurat/next: one entry in next.config.
import { withZiggurat } from 'ziggurat/next'
const nextConfig = withZiggurat({ reactStrictMode: true }, { name: 'site', size: '512MiB' })
const strict: boolean = nextConfig.reactStrictMode
void strict
// @ts-expect-error the cache's name is a string
withZiggurat({}, { name: 7 })
