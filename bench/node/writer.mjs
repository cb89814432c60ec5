// The other process of the segment benchmark: writes the small objects into
// the ziggurat cache and (as the same JSON bytes) into the lmdb database
// named on the command line, then exits.
import { open } from 'lmdb'
import { Cache } from '../../node/index.js'
import { KEYS, record } from './values.mjs'

const [name, path] = process.argv.slice(2)
const cache = new Cache(name, { size: '64MiB' })
const db = open({ path, encoding: 'binary' })
for (let i = 0; i < KEYS.length; i++) {
  cache.set(KEYS[i], record(i))
  await db.put(KEYS[i], Buffer.from(JSON.stringify(record(i))))
}
await db.close()
cache.close()
