'use strict'
// App calls an HttpCache stopped waiting for (appTimeout) that still run: a
// stale response answered, and the app runs on to its end. Left alone, every
// later request for the URL would start another call beside it, so a slow
// origin would see as many calls as requests. Instead, while an abandoned call
// of a URL runs, its fill lock holds the failed marker in the shared cache:
// every process of the host (of either language) answers the URL with its
// stale response without calling the app, until the call ends. A process
// abandons at most `maxAbandoned` calls at once (the crate's figure); past
// that, it waits for the app as if there were no appTimeout.

const { DEFAULTS } = require('./options.cjs')
const { ERROR } = require('./fill.cjs')

class Abandoned {
  constructor() {
    this.running = 0
    this.byKey = new Map()
  }

  /** Whether one more call may be abandoned now (else: wait for the app). */
  admit() {
    return this.running < DEFAULTS.maxAbandoned
  }

  static id(lock) {
    return typeof lock === 'string' ? lock : lock.toString('latin1')
  }

  /** The call of the URL whose fill lock is `lock` was abandoned: hold the URL until end(). */
  start(cache, lock, warn) {
    this.running++
    const id = Abandoned.id(lock)
    this.byKey.set(id, (this.byKey.get(id) ?? 0) + 1)
    try {
      cache.set(lock, ERROR, { ttl: DEFAULTS.abandonedHold })
    } catch (e) {
      warn('holding a URL for an abandoned call failed', e)
    }
  }

  /** The abandoned call ended: the URL's next request may call the app again. */
  end(cache, lock, warn) {
    this.running--
    const id = Abandoned.id(lock)
    const left = (this.byKey.get(id) ?? 1) - 1
    if (left) {
      this.byKey.set(id, left)
      return
    }
    this.byKey.delete(id)
    try {
      cache.delete(lock)
    } catch (e) {
      warn('releasing a URL after an abandoned call failed', e)
    }
  }
}

/** The process's one registry: every HttpCache of the process shares the cap. */
const calls = new Abandoned()

module.exports = { calls, Abandoned }
