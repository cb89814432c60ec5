// Values that carry their own checksum: a torn or mixed value fails `valid`.
function sum(s) {
  let h = 2166136261
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0
  return h
}

export function checked(key, i) {
  const pad = 'x'.repeat(i % 300)
  return { key, i, pad, sum: sum(`${key}:${i}:${pad}`) }
}

export function valid(key, v) {
  return (
    v !== null &&
    typeof v === 'object' &&
    v.key === key &&
    typeof v.pad === 'string' &&
    v.sum === sum(`${key}:${v.i}:${v.pad}`)
  )
}
