// The ES module entry of the metrics: the same function as require('ziggurat/metrics').
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

export const { collectMetrics } = require('./metrics.cjs')
