// A `cluster` worker of metrics-cluster.test.mjs: reads its cache's keys (hits of its own
// L1), reports the cache in its own registry and hands that registry to prom-client's
// AggregatorRegistry, as an app's workers do.
import { AggregatorRegistry, Registry } from 'prom-client'
import { Cache } from 'ziggurat'
import { collectMetrics } from 'ziggurat/metrics'

const cache = new Cache(process.env.ZIGGURAT_TEST_CACHE)
for (let i = 0; i < 10; i++) cache.get(`k${i}`)
for (let i = 0; i < 10; i++) cache.get(`k${i}`)
const registry = new Registry()
collectMetrics(cache, { registry })
AggregatorRegistry.setRegistries([registry])
new AggregatorRegistry()
process.send('ready')
process.on('disconnect', () => cache.close())
