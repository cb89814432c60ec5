// Next.js's caches on ziggurat: one entry. For the demo's comparison, NEXT_CACHE=default
// keeps Next.js's own per-instance cache, and NEXT_CACHE=redis puts it on Redis through
// @fortedigital/nextjs-cache-handler (cache-handler-redis.mjs).
import { fileURLToPath } from 'node:url'
import { withZiggurat } from 'ziggurat/next'

const config = {}
const mode = process.env.NEXT_CACHE ?? 'ziggurat'

export default mode === 'default'
  ? config
  : mode === 'redis'
    ? { ...config, cacheHandler: fileURLToPath(new URL('./cache-handler-redis.mjs', import.meta.url)), cacheMaxMemorySize: 0 }
    : withZiggurat(config, { name: process.env.ZIGGURAT_NEXT_CACHE ?? 'next-example', size: '128MiB' })
