// A Node.js writer the kill test SIGKILLs at random points: it writes
// self-checking values as fast as it can, and holds load leases too.
import { Cache } from 'ziggurat'
import { checked } from './checked.mjs'

const cache = new Cache(process.argv[2], { size: '8MiB', loaderTimeout: 5 })
process.stdout.write('ready\n')
let i = 0
for (;;) {
  for (let j = 0; j < 200; j++, i++) {
    const k = `k${i % 64}`
    cache.set(k, checked(k, i), { tags: [`t${i % 4}`] })
    if (i % 97 === 0) cache.delete(`k${(i * 7) % 64}`)
    if (i % 501 === 0) cache.invalidateTags(`t${i % 4}`)
  }
  // A load that may be cut short by the kill, its lease still held.
  await cache.getOrSet(`lease${i % 8}`, () => new Promise((r) => setTimeout(() => r(checked('lease', i)), 2)))
}
