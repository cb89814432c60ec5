// Types of ziggurat/next.
import type { CacheOptions } from './index.cjs'

/** The cache Next.js's caches live in: its name (default 'next') and the options of `new Cache`. */
export interface ZigguratNextOptions extends CacheOptions {
  name?: string
}

/**
 * `nextConfig` with Next.js's `cacheHandler` and `cacheHandlers.default` on a ziggurat cache
 * shared by every instance of the host, and `cacheMaxMemorySize: 0`.
 */
export declare function withZiggurat<T extends object>(nextConfig?: T, options?: ZigguratNextOptions): T & {
  cacheHandler: string
  cacheHandlers: Record<string, string>
  cacheMaxMemorySize: number
}

/** Next.js's `cacheHandler` (ISR pages, route handlers, the fetch cache). */
export declare class ZigguratCacheHandler {
  constructor(ctx?: { dev?: boolean })
  get(cacheKey: string, ctx?: object): Promise<{ lastModified: number; value: unknown } | null>
  set(cacheKey: string, data: unknown, ctx?: object): Promise<void>
  revalidateTag(tags: string | string[], durations?: { expire?: number }): Promise<void>
  resetRequestCache(): void
}

/** Next.js 16's `cacheHandlers` entry for 'use cache'. */
export declare function createUseCacheHandler(): {
  get(cacheKey: string, softTags?: string[]): Promise<unknown>
  set(cacheKey: string, pendingEntry: Promise<unknown>): Promise<void>
  refreshTags(): Promise<void>
  getExpiration(tags: string[]): Promise<number>
  updateTags(tags: string[], durations?: { expire?: number }): Promise<void>
}
