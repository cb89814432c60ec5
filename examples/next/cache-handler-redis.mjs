// The comparison's third mode (NEXT_CACHE=redis): @fortedigital/nextjs-cache-handler on
// Redis, set up as its README's quick start does.
import { CacheHandler } from '@fortedigital/nextjs-cache-handler'
import createRedisHandler from '@fortedigital/nextjs-cache-handler/redis-strings'
import { createClient } from 'redis'

const client = createClient({ url: process.env.REDIS_URL })
await client.connect()

CacheHandler.onCreation(() => ({
  handlers: [createRedisHandler({ client })],
}))

export default CacheHandler
