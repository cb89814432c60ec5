'use strict'
// getOrSet's miss: one promise per key in this process, and the host's lease
// driven to the end (wait for another process's load, or run the loader and
// land its result). The L1 hit and the arguments stay in Cache.getOrSet().

const { performance } = require('node:perf_hooks')
const { encode, stored, decode, FOREIGN } = require('./values.cjs')
const { meta } = require('./l1.cjs')
const { ZigguratError, LoadTimeoutError, translate } = require('./errors.cjs')
const { STEPS, CODES } = require('./rules.cjs')
const args = require('./args.cjs')

const M = 'Cache.getOrSet()'

const { HIT, LOAD, LOCAL, WAIT } = STEPS
const { NEGATIVE } = CODES

/**
 * What a loader receives, `ctx`: its `signal`, and what it may say of its
 * own result, kept in `said`: `ctx.setTtl(ttl)` (stored for that long, as
 * given), `ctx.setTags(tags)` (tags that depend on the value, such as its
 * author's, instead of the call's; a cached miss takes them too) and
 * `ctx.skip()` (the value is returned but not stored). A bad argument throws
 * at once, in the loader.
 *
 * @example
 * const { ctx, said } = loaderContext(signal)
 * await loader(ctx) // the loader calls ctx.setTags(`author:${row.authorId}`)
 */
function loaderContext(signal) {
  const said = { ttl: undefined, tags: undefined, skip: false }
  const ctx = {
    signal,
    setTtl(ttl) {
      said.ttl = args.duration(ttl, 'ctx.setTtl()', 'ttl')
    },
    setTags(tags) {
      const list = args.tags(tags, 'ctx.setTags()')
      if (list === undefined) throw new TypeError('ctx.setTags(): give the tags, as an array of strings or one string')
      said.tags = list
    },
    skip() {
      said.skip = true
    },
  }
  return { ctx, said }
}

/**
 * This process's loads in flight, one per key: a second getOrSet of a key
 * being loaded shares the first one's promise, its value handed out by
 * `out` (the copy mode's rule).
 *
 * @example
 * const flights = new Flights((v) => v)
 * await flights.share('post:2', () => load('post:2'))
 */
class Flights {
  #map = new Map()
  #out

  constructor(out) {
    this.#out = out
  }

  async share(k, start) {
    const fk = typeof k === 'string' ? `s${k}` : `b${k.toString('latin1')}`
    const shared = this.#map.get(fk)
    if (shared !== undefined) return this.#out(await shared)
    const p = start()
    this.#map.set(fk, p)
    try {
      return await p
    } finally {
      this.#map.delete(fk)
    }
  }
}

/**
 * What a cache says about one key's loads, once per key so that a hot key
 * cannot flood the log: a loaded value returned but not stored (counted in
 * `writes`), an early refresh that could not start. `warn(message)` is the
 * cache's way of warning.
 *
 * @example
 * const notes = new KeyNotes('blog', writes, (m) => process.emitWarning(m, 'ZigguratWarning'))
 * notes.notStored('post:2', err)
 */
class KeyNotes {
  #warned = new Set()

  constructor(name, writes, warn) {
    this.name = name
    this.writes = writes
    this.warn = warn
  }

  /** Counts a loaded value that could not be stored (it is still returned) and says so. */
  notStored(key, e) {
    this.writes.notStored()
    this.note(key, 'the value loaded for it was returned but not stored', e)
  }

  /** Says once per key what went wrong (`what`). */
  note(key, what, e) {
    const k = typeof key === 'string' ? key : key.toString('hex')
    if (this.#warned.has(k) || this.#warned.size > 1000) return
    this.#warned.add(k)
    this.warn(`cache ${JSON.stringify(this.name)}, key ${JSON.stringify(k)}: ${what}: ${e.message}`)
  }
}

/**
 * The loads of a cache with its segment. `cache` gives what they need: its
 * addon, L1, loaderTimeout in seconds, serializer ('auto' or 'msgpack'),
 * `notes` (a KeyNotes), `miss` (the sentinel of `take`), `take(key, out)` (an
 * addon result as a value kept in L1, or `miss`), `plan(options)`
 * (getOrSet's options checked), `closed()`, `open()` (throws once closed)
 * and `tier()`: the cluster tier (lib/joined.cjs), or null. With a tier, a
 * load asks Redis before its loader runs, and offers Redis what it loaded.
 *
 * @example
 * const loads = new Loads({ native, l1, loaderTimeout: 10, serializer: 'auto', notes, miss, take, plan, closed, open })
 * await loads.get('post:2', loader, { ttl: 600, negTtl: undefined, staleTtl: undefined, tags: undefined })
 */
class Loads {
  #c
  #flights
  /** L1 entries whose early refresh is not due before a time (performance.now() ms). */
  #notBefore = new WeakMap()

  constructor(cache) {
    this.#c = cache
    this.#flights = new Flights((v) => cache.l1.out(v))
  }

  /** The value of `k` (checked), concurrent calls of one key sharing one promise. */
  async get(k, loader, plan) {
    // A loader's miss this process's L1 holds, still valid: no call below it.
    if (this.#c.l1.negative(k) !== undefined) return undefined
    return this.#flights.share(k, () => this.#miss(k, loader, plan))
  }

  async #miss(key, loader, plan) {
    const c = this.#c
    let m
    try {
      m = c.native.begin(key, plan.ttl, plan.negTtl ?? undefined, plan.staleTtl ?? undefined, plan.tags)
    } catch (e) {
      throw translate(e, M)
    }
    for (;;) {
      switch (m.step) {
        case HIT: {
          const out = m.got()
          if (meta[0] === NEGATIVE) {
            c.l1.keepNegative(key)
            return undefined
          }
          const v = c.take(key, out)
          const r = m.takeRefresh()
          if (v === c.miss) {
            r?.giveBack()
            return this.#load(key, loader, plan)
          }
          if (r !== null) this.#refresh(r, key, loader)
          return v
        }
        case WAIT:
          try {
            m = await c.native.wait(m)
            c.open()
            c.native.afterWait(m)
          } catch (e) {
            throw translate(e, M, c.name)
          }
          break
        case LOAD:
        case LOCAL: {
          const found = await this.#asked(m)
          if (found !== undefined) {
            m.giveBack()
            return found
          }
          return this.#run(m, key, loader)
        }
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
      this.#c.notes.note(k, 'its early refresh could not start', translate(e, M))
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
   * With a cluster tier, the value Redis holds for a load step's key (with
   * clusterSingleFlight, once another host's load of it ended), or
   * undefined; a failed read is a miss.
   */
  async #asked(m) {
    const tier = this.#c.tier()
    const asked = tier?.tier.ask(m) ?? null
    if (asked === null) return undefined
    try {
      return tier.value(await asked)
    } catch {
      return undefined
    }
  }

  /**
   * With a cluster tier, once a load step ended: the value it stored is
   * offered to Redis, and the leases it held are given back (the host's
   * after Redis's, so that the host's other callers then find the value).
   */
  async #told(m) {
    const tier = this.#c.tier()
    if (tier === null) return
    try {
      // null: nothing to tell Redis, and the host's lease is back already.
      const told = tier.tier.tell(m)
      if (told !== null) await told
    } catch {
      m.giveBack()
    }
  }

  /** A value that landed but that this process cannot read: load without the lease. */
  async #load(key, loader, plan) {
    const value = await loader(loaderContext(AbortSignal.timeout(this.#c.loaderTimeout * 1000)).ctx)
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
    const { ctx, said } = loaderContext(ac.signal)
    let value
    try {
      value = await loader(ctx)
    } catch (e) {
      clearTimeout(timer)
      const seconds = (performance.now() - t0) / 1000
      if (c.closed()) {
        m.giveBack()
      } else {
        const stale = c.native.failed(m, seconds)
        const v = decode(stale, meta[0])
        await this.#told(m)
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
    if (said.skip) {
      // The loader said not to store it: counted as a load, the lease given back.
      c.native.landUnstored(m, seconds)
      await this.#told(m)
      return value ?? undefined
    }
    if (value === undefined || value === null) {
      try {
        c.native.landNegative(m, seconds, said.tags)
      } catch (e) {
        this.#c.notes.notStored(key, translate(e, M))
      }
      await this.#told(m)
      return undefined
    }
    let enc
    try {
      enc = encode(value, M, c.serializer)
    } catch (e) {
      c.native.landUnstored(m, seconds)
      await this.#told(m)
      this.#c.notes.notStored(key, e)
      return value
    }
    // What every process reads from now on: the caller too gets that form.
    const read = stored(enc, value)
    try {
      c.native.land(m, enc[0], enc[1], enc[2], enc[3], enc[4], seconds, said.ttl, said.tags)
      c.l1.keep(key, read, enc[0], enc[1] ?? enc[2])
    } catch (e) {
      this.#c.notes.notStored(key, translate(e, M))
    }
    await this.#told(m)
    return read
  }
}

module.exports = { Loads, Flights, KeyNotes, loaderContext }
