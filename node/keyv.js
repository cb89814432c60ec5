// The ES module entry of the Keyv adapter: the same class as require('ziggurat/keyv').
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const k = require('./keyv.cjs')

export const { KeyvZiggurat } = k
export default KeyvZiggurat
