// The ES module entry: the same classes as require('ziggurat').
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const z = require('./cache.cjs')

export const { Cache, Namespace, ZigguratError, LoadTimeoutError, SegmentError } = z
export default z
