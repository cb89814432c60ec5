'use strict'
// One call of the app per URL per host: a fill holds the lease of its lock
// key through the cache's getOrSet (across processes and languages), and the
// requests that meet it wait, then read what it stored. The marker it leaves
// ('S' stored, 'E' the app failed and a stale response answered, 'T'
// streamed) lives a moment; a fill that stores nothing leaves a cached miss,
// so that the URL is not waited on for hitForMiss seconds.

const { DEFAULTS } = require('./options.cjs')
const { ERROR } = require('./fill.cjs')

const now = () => Date.now() / 1000

/**
 * Runs `fill` through the lease: `run()` calls the app and settles once what
 * becomes of its response is known (its outcome). Returns `{ reply }` to send
 * (found stored, or stale after a failure) or run()'s outcome; throws the
 * app's error when no stale response may answer it.
 */
async function coalesced(engine, fill, run) {
  const state = { ran: false, outcome: undefined, error: undefined }
  const loader = async () => {
    state.ran = true
    const r = fill.recheck(now())
    if (r !== null) {
      state.outcome = { reply: r }
      return fill.marker()
    }
    try {
      state.outcome = await run()
    } catch (e) {
      state.error = e
      return fill.stale !== null ? ERROR : null
    }
    return fill.marker()
  }
  const rounds = fill.coalesce ? 2 : 0
  for (let attempt = 0; attempt < rounds; attempt++) {
    let marker
    try {
      marker = await engine.cache.getOrSet(fill.lock, loader, { ttl: DEFAULTS.markerTtl, negTtl: engine.o.hitForMiss })
    } catch (e) {
      // The lease failed (a full or broken segment): this request goes on alone.
      if (!state.ran) break
    }
    if (state.ran) break
    let r = null
    try {
      r = fill.afterWait(marker ?? null, now())
    } catch {
      r = null
    }
    if (r !== null) return { reply: r }
    if (!fill.retryWait(marker ?? null, attempt)) break
  }
  if (!state.ran) await loader()
  if (state.error !== undefined) {
    const r = fill.staleIfError(0, now())
    if (r === null) throw state.error
    return { reply: r }
  }
  return state.outcome
}

module.exports = { coalesced, now }
