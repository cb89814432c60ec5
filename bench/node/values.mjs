// The values and keys every Node.js benchmark uses: a small object (a user
// record of ~120 bytes of JSON) under 1024 keys.

export const KEYS = Array.from({ length: 1024 }, (_, i) => `user:${i}`)

/** The small object stored under key number `i`. */
export function record(i) {
  return {
    id: i,
    name: 'Ada Lovelace',
    email: `ada${i}@example.com`,
    roles: ['admin', 'editor'],
    active: true,
    score: 12.5,
  }
}
