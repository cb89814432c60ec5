'use strict'
// The Cache's methods for the package's own modules (ziggurat/http), kept off
// its public surface: a fill's snapshot and its guarded write, whether it is
// joined to the cluster tier.

module.exports = {
  /** `cache[SEEN](key)`: the snapshot a guarded write compares against, or null. */
  SEEN: Symbol('ziggurat.seen'),
  /** `cache[FILL](key, value, ttl, tags, seen, of)`: a write only while `seen` holds; whether it stored. */
  FILL: Symbol('ziggurat.fill'),
  /** `cache[JOINED]`: whether the cache is joined to the cluster tier (its methods then return promises). */
  JOINED: Symbol('ziggurat.joined'),
}
