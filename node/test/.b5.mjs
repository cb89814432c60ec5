import { Cache } from 'ziggurat'
const o = new Cache('node24-b5', { size: '16MiB', l1Items: 0 })
const N = 1000
const dk = Array.from({ length: N }, (_, i) => `key:${i}`)
for (const k of dk) o.set(k, { id: k, title: 'Hello world', n: 42, tags: ['a', 'b'] })
let x = 0
const t0 = process.hrtime.bigint()
for (let r = 0; r < 1000; r++) for (const k of dk) { x ^= o.get(k) ? 1 : 0 }
console.log(Number(process.hrtime.bigint() - t0) / 1e6, 'ns per get')
o.unlink(); o.close()
