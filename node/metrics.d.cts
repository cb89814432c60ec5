// Types of the metrics entry (ES module and CommonJS entries alike).
import type { Registry } from 'prom-client'
import { Cache } from './index.cjs'

/** What collectMetrics() returns: the caches it reports can change. */
export interface MetricsHandle {
  /** Reports `cache` too. */
  add(cache: Cache): void
  /** Stops reporting `cache`. */
  remove(cache: Cache): void
  /** Removes every ziggurat metric from the registry. */
  unregister(): void
}

/** Reports `caches` in a prom-client registry (default: prom-client's global one). */
export declare function collectMetrics(caches: Cache | Cache[], options?: { registry?: Registry }): MetricsHandle
