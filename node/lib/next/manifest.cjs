'use strict'
// The tags of a Next.js app, shared by every instance on the host: for each tag,
// when it went stale and when it expired (ms since the epoch), as Next.js's own
// in-process manifest keeps them, but in the host's cache: a revalidateTag() in
// any instance is read by every other at its next lookup, with no call to a
// tags service. The two times of a tag live under keys of their own
// (`next:tag:s:<tag>`, `next:tag:e:<tag>`), each written whole: two instances
// revalidating one tag at once never lose one time to the other's
// read-modify-write of a shared record.

const STALE = 'next:tag:s:'
const EXPIRED = 'next:tag:e:'
// A record outlives any entry it could void (entries live at most a year).
const RECORD_TTL = 366 * 24 * 3600

class Manifest {
  constructor(cache) {
    this.cache = cache
  }

  /** The record of `tag`: { stale, expired } (either may be missing). */
  of(tag) {
    const stale = this.cache.get(STALE + tag)
    const expired = this.cache.get(EXPIRED + tag)
    return { stale: typeof stale === 'number' ? stale : undefined, expired: typeof expired === 'number' ? expired : undefined }
  }

  /**
   * Marks `tags` revalidated now: expired at once, or with `durations`
   * (Next.js 16's profiles) stale at once and expired `durations.expire`
   * seconds later.
   */
  update(tags, durations) {
    const now = Date.now()
    for (const tag of typeof tags === 'string' ? [tags] : tags) {
      if (durations) this.cache.set(STALE + tag, now, { ttl: RECORD_TTL })
      if (!durations) this.cache.set(EXPIRED + tag, now, { ttl: RECORD_TTL })
      else if (durations.expire !== undefined) this.cache.set(EXPIRED + tag, now + durations.expire * 1000, { ttl: RECORD_TTL })
    }
  }

  /**
   * What the revalidations of `tags` did to an entry made at `timestamp`:
   * 'expired' (a miss), 'stale' (served once while Next.js makes it anew) or
   * 'fresh'.
   */
  state(tags, timestamp) {
    const now = Date.now()
    let stale = false
    // A revalidation in the same millisecond as the store counts: at worst a page
    // stored just after it is made once more, never one stored before it served.
    for (const tag of tags) {
      const r = this.of(tag)
      if (typeof r.expired === 'number' && r.expired >= timestamp && r.expired <= now) return 'expired'
      if (typeof r.stale === 'number' && r.stale >= timestamp) stale = true
    }
    return stale ? 'stale' : 'fresh'
  }

  /** The latest expiry of `tags` (0: never revalidated). */
  expiration(tags) {
    let max = 0
    for (const tag of tags) {
      const e = this.of(tag).expired
      if (typeof e === 'number' && e > max) max = e
    }
    return max
  }
}

module.exports = { Manifest }
