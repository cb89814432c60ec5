'use strict'
// getOrSet's miss: one promise per key in this process, and the host's lease
// driven to the end (wait for another process's load, or run the loader and
// land its result). The L1 hit and the arguments stay in Cache.getOrSet().

const { performance } = require('node:perf_hooks')
const { encode, decode, FOREIGN } = require('./values.cjs')
const { meta } = require('./l1.cjs')
const { ZigguratError, LoadTimeoutError, translate } = require('./errors.cjs')
const { mapKey } = require('./degraded.cjs')

const M = 'Cache.getOrSet()'

const STEP_VALUE = 0
const STEP_NEGATIVE = 1
const STEP_LOAD = 2
const STEP_WAIT = 3

/**
 * The loads of one Cache. `cache` gives what they need of it: its name, addon,
 * L1, degraded store (or null), loaderTimeout and ttl in seconds, its
 * serializer ('auto' or 'msgpack'), `miss` (the
 * sentinel of `take`), `take(key, out)` (an addon result as a value kept in
 * L1, or `miss`), `plan(options)` (getOrSet's options checked), `closed()`
 * and `open()` (throws once closed).
 *
 * @example
 * const loads = new Loads({ name, native, l1, dg: null, loaderTimeout: 10, ttl: 300, serializer: 'auto', miss, take, plan, closed, open })
 * await loads.get('post:2', loader, { ttl: 600, negTtl: undefined, staleTtl: undefined, tags: undefined })
 */
class Loads {
  #c
  #flights = new Map()
  #warned = new Set()
  /** L1 entries whose early refresh is not due before a time (performance.now() ms). */
  #notBefore = new WeakMap()
  /** Loads, failed loads and their seconds of a degraded cache (the addon counts the others). */
  loads = 0
  loadErrors = 0
  loadSeconds = 0
  loadMaxSeconds = 0

  constructor(cache) {
    this.#c = cache
  }

  /** The value of `k` (checked), concurrent calls of one key sharing one promise. */
  async get(k, loader, plan) {
    // A loader's miss this process's L1 holds, still valid: no call below it.
    if (this.#c.l1.negative(k) !== undefined) return undefined
    const fk = typeof k === 'string' ? `s${k}` : `b${k.toString('latin1')}`
    const shared = this.#flights.get(fk)
    if (shared !== undefined) return this.#c.l1.out(await shared)
    const p = this.#miss(k, loader, plan)
    this.#flights.set(fk, p)
    try {
      return await p
    } finally {
      this.#flights.delete(fk)
    }
  }

  async #miss(key, loader, plan) {
    const c = this.#c
    if (c.dg !== null) return this.#degradedLoad(key, loader, plan)
    let m
    try {
      m = c.native.begin(key, plan.ttl, plan.negTtl ?? undefined, plan.staleTtl ?? undefined, plan.tags)
    } catch (e) {
      throw translate(e, M)
    }
    for (;;) {
      switch (m.step) {
        case STEP_VALUE: {
          const v = c.take(key, m.got())
          const r = m.takeRefresh()
          if (v === c.miss) {
            r?.giveBack()
            return this.#load(key, loader, plan)
          }
          if (r !== null) this.#refresh(r, key, loader)
          return v
        }
        case STEP_NEGATIVE:
          c.l1.keepNegative(key)
          return undefined
        case STEP_WAIT:
          try {
            m = await c.native.wait(m)
            c.open()
            c.native.afterWait(m)
          } catch (e) {
            throw translate(e, M, c.name)
          }
          break
        case STEP_LOAD:
          return this.#run(m, key, loader)
        default:
          throw new ZigguratError(`${M}: unknown step ${m.step}`)
      }
    }
  }

  /**
   * A getOrSet hit in L1 with refreshAhead: the early refresh of `k`, run in
   * the background, when the addon says its entry is late in its life and
   * this process took the key's refresh lease (one per key per host).
   * `entry` is the L1 entry that answered: until the time the addon named,
   * its later hits do not ask again. The call's `options` are checked (and
   * throw) only when the addon is asked, as an L1 hit without refreshAhead
   * checks none.
   */
  refreshHit(k, loader, options, entry) {
    if (entry !== undefined) {
      const at = this.#notBefore.get(entry)
      if (at !== undefined && performance.now() < at) return
    }
    const plan = this.#c.plan(options)
    let r
    try {
      r = this.#c.native.refreshOf(k, plan.ttl, plan.negTtl ?? undefined, plan.staleTtl ?? undefined, plan.tags)
    } catch (e) {
      // The caller has its value: a refresh that cannot start is skipped (the next hit asks again).
      this.#warn(k, 'its early refresh could not start', translate(e, M))
      return
    }
    if (typeof r === 'number') {
      if (entry !== undefined && r > 0) this.#notBefore.set(entry, performance.now() + r)
      return
    }
    if (entry === undefined) {
      this.#refresh(r, k, loader)
      return
    }
    // The refreshed value lands as a new L1 entry; until then this one asks
    // no more, and after a failed refresh it asks again.
    this.#notBefore.set(entry, Infinity)
    this.#refresh(r, k, loader).finally(() => this.#notBefore.delete(entry))
  }

  /**
   * Runs an early refresh's loader in the background and lands its result as
   * a load's; a failure gives the refresh lease back and leaves the value.
   */
  #refresh(m, key, loader) {
    return this.#run(m, key, loader).catch(() => {})
  }

  /**
   * getOrSet without a segment: this process's entry ('local'), else the loader, whose
   * result 'local' keeps (a loader's undefined or null is not cached, as in Python).
   */
  async #degradedLoad(key, loader, plan) {
    const c = this.#c
    const mk = mapKey(key, M)
    const v = c.dg.get(mk, c.miss)
    if (v !== c.miss) return v
    this.loads++
    const t0 = performance.now()
    let value
    try {
      value = await loader({ signal: AbortSignal.timeout(c.loaderTimeout * 1000) })
    } catch (e) {
      this.loadErrors++
      throw e
    } finally {
      const seconds = (performance.now() - t0) / 1000
      this.loadSeconds += seconds
      this.loadMaxSeconds = Math.max(this.loadMaxSeconds, seconds)
    }
    if (value === undefined || value === null) return undefined
    if (c.dg.local && !c.closed()) {
      try {
        encode(value, M, c.serializer)
        c.dg.set(mk, value, plan.ttl ?? c.ttl, plan.tags)
      } catch (e) {
        this.#notStored(key, e)
      }
    }
    return value
  }

  /** A value that landed but that this process cannot read: load without the lease. */
  async #load(key, loader, plan) {
    const value = await loader({ signal: AbortSignal.timeout(this.#c.loaderTimeout * 1000) })
    return value === null ? undefined : value
  }

  /** Runs the loader while this process holds the key's lease, then lands its result. */
  async #run(m, key, loader) {
    const c = this.#c
    const ac = new AbortController()
    const timer = setTimeout(
      () =>
        ac.abort(
          new LoadTimeoutError(
            `${M}: the loader of ${JSON.stringify(String(key))} did not finish within loaderTimeout ` +
              `(${c.loaderTimeout} s) (cache ${JSON.stringify(c.name)})`,
          ),
        ),
      Math.min(c.loaderTimeout * 1000, 2 ** 31 - 1),
    )
    const t0 = performance.now()
    let value
    try {
      value = await loader({ signal: ac.signal })
    } catch (e) {
      clearTimeout(timer)
      const seconds = (performance.now() - t0) / 1000
      if (c.closed()) {
        m.giveBack()
      } else {
        const stale = c.native.failed(m, seconds)
        const v = decode(stale, meta[0])
        if (v !== undefined && v !== FOREIGN) return v
      }
      throw e
    }
    clearTimeout(timer)
    const seconds = (performance.now() - t0) / 1000
    if (c.closed()) {
      // Closed while loading: nothing is stored, and the others need not wait for the lease.
      m.giveBack()
      return value ?? undefined
    }
    if (value === undefined || value === null) {
      try {
        c.native.landNegative(m, seconds)
      } catch (e) {
        this.#notStored(key, translate(e, M))
      }
      return undefined
    }
    let enc
    try {
      enc = encode(value, M, c.serializer)
    } catch (e) {
      c.native.landUnstored(m, seconds)
      this.#notStored(key, e)
      return value
    }
    try {
      c.native.land(m, enc[0], enc[1], enc[2], enc[3], enc[4], seconds)
      c.l1.keep(key, value, enc[0], enc[1] ?? enc[2])
    } catch (e) {
      this.#notStored(key, translate(e, M))
    }
    return value
  }

  /** Counts a loaded value that could not be stored (it is still returned) and says so. */
  #notStored(key, e) {
    this.#c.writes.notStored()
    this.#warn(key, 'the value loaded for it was returned but not stored', e)
  }

  /** Says once per key what went wrong (`what`), so that a hot key cannot flood the log. */
  #warn(key, what, e) {
    const k = typeof key === 'string' ? key : key.toString('hex')
    if (this.#warned.has(k) || this.#warned.size > 1000) return
    this.#warned.add(k)
    process.emitWarning(`cache ${JSON.stringify(this.#c.name)}, key ${JSON.stringify(k)}: ${what}: ${e.message}`, 'ZigguratWarning')
  }
}

module.exports = { Loads }
