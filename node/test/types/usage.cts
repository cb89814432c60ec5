// Checked by `tsc --noEmit` (test/types.test.mjs) as CommonJS: `require('ziggurat')`
// takes the types of index.d.cts (usage.ts takes the same through index.d.ts).
import { Cache, Namespace, SegmentError, ZigguratError, type Stats } from 'ziggurat'
import { KeyvZiggurat } from 'ziggurat/keyv'

const cache = new Cache('blog', { size: '256MiB', degraded: 'local' })
cache.set('post:1', { title: 'Hello' }, { ttl: 60, tags: ['posts'] })
const title: string | undefined = cache.get<{ title: string }>('post:1')?.title
const posts: Namespace = cache.namespace('posts')
const s: Stats = cache.stats()
const store = new KeyvZiggurat(cache)
const e: ZigguratError = new SegmentError('x')
void [title, posts, s, store, e]

// @ts-expect-error a Map is not a Value
cache.set('k', new Map())
// @ts-expect-error a key is a string or bytes
cache.get(42)

// ziggurat/http as CommonJS.
import { HttpCache } from 'ziggurat/http'
const pagesCjs = new HttpCache(new Cache('pages-cjs'), { allowedHosts: ['example.com'] })
void pagesCjs.express()
