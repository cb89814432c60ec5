// Types of the Keyv adapter (ES module and CommonJS entries alike).
import { EventEmitter } from 'node:events'
import { Cache, CacheOptions } from './index.cjs'

/** Keyv's store contract over a ziggurat Cache shared by every process of the host. */
export declare class KeyvZiggurat extends EventEmitter {
  /** An open Cache, or the name of one to open with `options` (closed by disconnect()). */
  constructor(cache: Cache | string, options?: CacheOptions)
  opts: Record<string, unknown>
  namespace: string | undefined
  readonly cache: Cache
  get<T = unknown>(key: string): Promise<T | undefined>
  getMany<T = unknown>(keys: string[]): Promise<Array<T | undefined>>
  /** `ttl` in milliseconds (none or 0: until evicted). */
  set(key: string, value: unknown, ttl?: number): Promise<boolean>
  setMany(entries: Array<{ key: string; value: unknown; ttl?: number }>): Promise<void>
  delete(key: string): Promise<boolean>
  deleteMany(keys: string[]): Promise<boolean>
  has(key: string): Promise<boolean>
  hasMany(keys: string[]): Promise<boolean[]>
  /** Voids this namespace's entries in every process. */
  clear(): Promise<void>
  disconnect(): Promise<void>
}
export default KeyvZiggurat
