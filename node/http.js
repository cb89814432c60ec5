// The ES module entry of the HTTP response cache: the same class as require('ziggurat/http').
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const h = require('./http.cjs')

export const { HttpCache } = h
export default HttpCache
