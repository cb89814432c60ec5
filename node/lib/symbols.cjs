'use strict'
// The Cache's methods for the package's own modules (ziggurat/http), kept off
// its public surface: a fill's snapshot and its guarded write.

module.exports = {
  /** `cache[SEEN](key)`: the snapshot a guarded write compares against, or null. */
  SEEN: Symbol('ziggurat.seen'),
  /** `cache[FILL](key, value, ttl, tags, seen, of)`: a write only while `seen` holds; whether it stored. */
  FILL: Symbol('ziggurat.fill'),
}
