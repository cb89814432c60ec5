// Types of the ziggurat package, for the CommonJS entry and (re-exported by
// index.d.ts) the ES module entry alike.

/** A duration: seconds (Infinity: never), or a string such as '500ms', '30s', '5m', '1.5h', '7d'. */
export type Duration = number | string

/** A size: bytes, or a string such as '256MiB' (binary) or '1GB' (decimal). */
export type Size = number | string

/** A key: a string (its UTF-8 bytes) or a Buffer/Uint8Array (its bytes); 1 to 4096 bytes. */
export type Key = string | Uint8Array

/** JSON data: what `set` stores as JSON text. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

/** What a cache stores: JSON data, a 64-bit BigInt, or bytes. */
export type Value = JsonValue | bigint | Uint8Array

/** How a cache stores values that are not integers (the `serializer` option). */
export type Serializer = 'auto' | 'msgpack'

/**
 * What a cache with `serializer: 'msgpack'` stores: JSON data, numbers (NaN and
 * Infinity too), Buffers, Dates and BigInts beyond 2^53 anywhere in the value.
 */
export type MsgpackValue =
  | null
  | boolean
  | number
  | string
  | bigint
  | Uint8Array
  | Date
  | MsgpackValue[]
  | { [key: string]: MsgpackValue }

/** What a cache of serializer `S` stores. */
export type ValueOf<S extends Serializer = 'auto'> = S extends 'msgpack' ? MsgpackValue : Value

// What a serializer takes besides JSON data, anywhere in a value: 'msgpack' keeps each as
// it is; 'auto' stores a Date as JSON.stringify writes it (its ISO string, read back as such).
type Kept<S extends Serializer> = S extends 'msgpack' ? bigint | Uint8Array | Date : Date
// What is not data: stored, it would come back as something else.
type Refused = symbol | ((...args: never[]) => unknown) | Map<unknown, unknown> | Set<unknown> | Uint8Array | bigint

/**
 * `T` checked part by part against what serializer `S` stores (interfaces and readonly
 * arrays included; an undefined property is left out, as JSON.stringify leaves it out).
 */
export type Storable<T, S extends Serializer = 'auto'> = T extends null | boolean | number | string | undefined | Kept<S>
  ? T
  : T extends Refused
    ? never
    : T extends readonly unknown[]
      ? { readonly [K in keyof T]: Storable<T[K], S> }
      : T extends object
        ? { [K in keyof T]: Storable<T[K], S> }
        : never

/** A value `set` takes in a cache of serializer `S`: also a BigInt counter or bytes, at the top. */
export type StorableValue<T, S extends Serializer = 'auto'> = T extends undefined
  ? never
  : T extends bigint | Uint8Array
    ? T
    : Storable<T, S>

/** Tags: one tag, or a list of at most 8. */
export type Tags = string | readonly string[]

/** Where a cache's cluster tier is: a URL, or an array of the URLs of a Redis Cluster's seed nodes. */
export type Redis = string | readonly string[]

/** A method's result: `T` itself, or a promise of it in a cache joined to Redis (`R` not undefined). */
export type Joined<R extends Redis | undefined, T> = [R] extends [undefined] ? T : Promise<T>

export interface CacheOptions<S extends Serializer = Serializer, R extends Redis | undefined = Redis | undefined> {
  /** Bytes of entries in the shared segment (default: 64 MiB, fitted to the directory's free space). */
  size?: Size
  /** Bytes of cached misses (default: a sixteenth of `size`, at least 1 MiB). */
  negSize?: Size
  /** Items this process keeps as live objects (default 10000; 0: no L1). */
  l1Items?: number
  /** How long a value lives (default 300 s). */
  ttl?: Duration
  /** How long a loader's miss is cached (default 30 s; null: not cached). */
  negTtl?: Duration | null
  /** How long past its TTL a value may answer a failed load (default null: off). */
  staleTtl?: Duration | null
  /** The fraction of a loaded value's TTL taken off at random (default 0.1). */
  jitter?: number
  /** How long callers wait for another caller's load, and when a loader's signal aborts (default 10 s). */
  loaderTimeout?: Duration
  /** The directory of the segment files (default '/dev/shm'). */
  directory?: string
  /** The expected size of an entry in bytes, which sizes the index (default 256). */
  avgItemSize?: number
  /** Seconds a write waits for a shard lock held by another process (default 0.5). */
  lockTimeout?: number
  /** Huge pages for the segment: 'auto' (default), 'require' or 'off'. */
  hugePages?: 'auto' | 'require' | 'off'
  /**
   * What a hit returns: the cached object itself ('shared', default), a shallow copy
   * ('copy'), or a value decoded anew from the stored encoding on every hit ('decode': a
   * caller may change what it got, however deep, and no other caller sees it; numbers
   * and strings are returned as they are).
   *
   * @example
   * const c = new Cache('blog', { copy: 'decode' })
   * c.set('post:1', { tags: ['a'] }); c.get('post:1').tags.push('b')
   * c.get('post:1') // { tags: ['a'] }
   */
  copy?: 'shared' | 'copy' | 'decode'
  /** Deep-freeze the objects L1 keeps, so that a mutation throws in strict code (default false). */
  debug?: boolean
  /** Without a usable segment: cache nothing ('passthrough', default), in this process alone ('local'), or throw SegmentError ('raise'). */
  degraded?: 'passthrough' | 'local' | 'raise'
  /** With degraded 'local': the longest an entry lives in a process (default 1 s). */
  degradedTtl?: Duration
  /**
   * How values that are not integers are stored: 'auto' (default; JSON text and bytes, as
   * Python's serializer="auto") or 'msgpack' (as Python's serializer="msgpack"; needs the
   * msgpackr package). Every process of a cache must use the same one.
   */
  serializer?: S
  /** Loaders' cached misses this process keeps in L1, apart from l1Items (default l1Items / 10; 0: none). */
  l1NegativeItems?: number
  /**
   * The last fraction of a value's TTL, in [0, 1), in which a getOrSet hit answers at once
   * and reloads the value in the background, once per key per host (default 0: never).
   */
  refreshAhead?: number
  /** Replace a segment file that cannot be attached (damaged, another layout) with an empty one (default false). */
  recreate?: boolean
  /** Share the files with this group (a group name or a gid), mode 660 (default: the owner alone). */
  group?: string | number
  /** A segment of its own for this version of the values (`<name>.ver-<version>`): a whole number >= 0 or 1-16 of A-Z a-z 0-9 _ -. */
  version?: number | string
  /**
   * Where the cache's warnings go (default: process.emitWarning, type ZigguratWarning):
   * each is an Error named 'ZigguratWarning'. If it throws, the warning goes to the process.
   *
   * @example
   * const cache = new Cache('blog', { onWarning: (w) => logger.warn({ err: w }, w.message) })
   */
  onWarning?: (warning: Error) => void
  /**
   * Joins the cache to the cluster tier: Redis or Valkey under every host (see
   * docs/cluster.md). `get`, the writes and the many-key methods then return promises.
   *
   * @example
   * const cache = new Cache('shop', { redis: 'redis://10.0.0.5:6379/0', secret: process.env.CACHE_SECRET })
   * await cache.set('product:7', { price: 12.5 })
   */
  redis?: R
  /** With `redis`: the secret values and events in Redis are signed with (at least 16 bytes; an array: the first signs, all verify). */
  secret?: string | Uint8Array | readonly (string | Uint8Array)[]
  /** With `redis`: how long a call to Redis may take (default 0.1 s, at most 60 s). */
  redisTimeout?: Duration
  /** With `redis`: entries the invalidation stream keeps (default 100000; at least 100). */
  streamLength?: number
  /** With `redis`: one load per key for the whole cluster, not per host (default false). */
  clusterSingleFlight?: boolean
}

export interface SetOptions {
  /** How long the value lives (default: the cache's ttl). */
  ttl?: Duration
  /** Tags the value carries (at most 8), for invalidateTags. */
  tags?: Tags
}

export interface GetOrSetOptions extends SetOptions {
  /** How long a loader's undefined or null is cached (default, or null: the cache's negTtl). */
  negTtl?: Duration | null
  /** How long past its TTL a value may answer a failed load (default, or null: the cache's staleTtl). */
  staleTtl?: Duration | null
}

export interface IncrOptions {
  /** Where a missing counter starts (default 0). */
  default?: number | bigint
  /** Tags of a counter this call creates. */
  tags?: Tags
}

/** The entries of setMany: a Map, a plain object, or an iterable of [key, value] pairs. */
export type Entries<V = Value> = Map<Key, V> | Record<string, V> | Iterable<readonly [Key, V]>

export interface MemoizeOptions<A extends unknown[]> {
  /** The keys' prefix (default: the function's name; an anonymous function needs one). */
  name?: string
  /** The key of a call (after `name:`); default: a digest of the arguments as canonical JSON. */
  key?: (...args: A) => string
  /** How long a result lives (default: the cache's ttl). */
  ttl?: Duration
  /** Tags of each result: a list, or a function of the call's arguments returning one. */
  tags?: Tags | ((...args: A) => Tags)
  /** How long a result of undefined or null is cached (default, or null: the cache's negTtl). */
  negTtl?: Duration | null
  /** How long past its TTL a result may answer a failed call (default, or null: the cache's staleTtl). */
  staleTtl?: Duration | null
}

/** A function memoized by memoize(): each call goes through getOrSet. */
export interface Memoized<A extends unknown[], R> {
  (...args: A): Promise<R | undefined>
  /** The cache key of a call with these arguments. */
  key(...args: A): string
  /** Removes the cached result of a call with these arguments; whether there was one. */
  invalidate(...args: A): boolean
}

/** What a loader receives. */
export interface LoaderContext {
  /** Aborts when the load takes longer than the cache's loaderTimeout. */
  signal: AbortSignal
  /** Stores this load's value for `ttl` (seconds or a string such as '5m'), as given, instead of the call's. */
  setTtl(ttl: number | string): void
  /** Stores this load's value (or cached miss) with these tags instead of the call's, e.g. its author's. */
  setTags(tags: Tags): void
  /** Returns this load's value without storing it (counted as a load; the next call loads again). */
  skip(): void
}

export type Loader<T> = (context: LoaderContext) => T | undefined | null | Promise<T | undefined | null>

export interface Stats {
  name: string
  l1: {
    items: number
    maxItems: number
    /** Loaders' cached misses in L1, and their bound (l1NegativeItems). */
    negativeItems: number
    maxNegativeItems: number
    hits: number
    misses: number
    /** Entries dropped to stay within maxItems (or maxNegativeItems). */
    evictions: number
    /** Entries found expired or invalidated, and dropped. */
    staleDrops: number
  }
  /** Reads of the segment; staleReads: expired values read by a load as its fallback. */
  l2: { hits: number; misses: number; staleReads: number }
  negHits: number
  /** Entries this process could not read (values pickled by Python; under msgpack, values that are not plain data). */
  foreign: number
  decodeErrors: number
  /** Writes the segment refused (ZigguratError), storeFailures included. */
  writeErrors: number
  /** Values getOrSet loaded and returned without storing them. */
  storeFailures: number
  loads: number
  loadErrors: number
  /** Seconds spent in loader calls, and the longest call. */
  loadSeconds: number
  loadMaxSeconds: number
  waits: number
  takeovers: number
  staleServed: number
  /** Early refreshes this process started (refreshAhead). */
  refreshes: number
  /** Why the segment cannot be used, or null. */
  degraded: string | null
  /** The same as a short name (missing_directory, not_writable, no_space, ...), or null. */
  degradedCause: string | null
  /** The `degraded` option. */
  degradedMode: 'passthrough' | 'local' | 'raise'
  /** The host segment's own figures (entries, bytes_used, evictions, ...); {} when degraded. */
  host: Record<string, number>
  /** The same of the cached-miss segment (cached misses and load leases); {} when degraded. */
  negHost: Record<string, number>
  /** With `redis`: the cluster tier's counters of this process and the host's figures. */
  l3?: TierStats
}

/** `stats().l3` of a cache joined to the cluster tier (docs/node.md, docs/cluster.md). */
export interface TierStats {
  /** Reads that found a value in Redis, and that found none. */
  hits: number
  misses: number
  /** Values read from Redis that the host's segment took. */
  fills: number
  /** With clusterSingleFlight: loads that waited for another host's and got its value, or gave up. */
  leaseWaits: number
  leaseTimeouts: number
  /** Values that failed their MAC; values refused as older than a write the host knows of, or stamped too far ahead. */
  badSignatures: number
  refusedOlder: number
  refusedAhead: number
  /** Calls that failed for want of the server, and that timed out; whether the last call reached it. */
  errors: number
  timeouts: number
  connected: boolean
  /** Whether the host's stream reader has a place in the stream. */
  positioned: boolean
  /** The host's figures: events this host published and applied, replays, clears after a gap, writes kept on the host, the last sequence number, the reader's lag (ms). */
  eventsPublished: number
  eventsApplied: number
  replays: number
  gapClears: number
  dirtyWrites: number
  lastSeq: number
  lagP50Ms: number
  lagP99Ms: number
}

/**
 * The methods of a cache's keys, which a `Cache` and each of its `Namespace`s have (a
 * namespace's keys are the cache's keys under `prefix + ':'`).
 */
export interface Keys<S extends Serializer = 'auto', R extends Redis | undefined = undefined> {
  /** The value of `key` (this process's L1, else the host's segment, else Redis), or undefined. */
  get<T = ValueOf<S>>(key: Key): Joined<R, T | undefined>
  /** Whether `key` holds a value in this host's tiers. */
  has(key: Key): boolean
  /** Stores `value` under `key`; once it returns, no process of the host returns the old value. */
  set<T>(key: Key, value: T & StorableValue<T, S>, options?: SetOptions): Joined<R, void>
  /** Stores `value` only if `key` holds no fresh value; whether it did. */
  add<T>(key: Key, value: T & StorableValue<T, S>, options?: SetOptions): Joined<R, boolean>
  /** Adds `delta` to the counter under `key` for every process of the host; the result. */
  incr(key: Key, delta?: number | bigint, options?: IncrOptions): Joined<R, number | bigint>
  /** Takes `delta` (default 1) off the counter under `key` for every process of the host; the result. */
  decr(key: Key, delta?: number | bigint, options?: IncrOptions): Joined<R, number | bigint>
  /** Gives the value under `key` a new TTL from now; whether it held one. */
  touch(key: Key, options?: { ttl?: Duration }): Joined<R, boolean>
  /** Removes `key`'s value; whether there was one. */
  delete(key: Key): Joined<R, boolean>
  /** The value of `key`, loading it once per key per host on a miss. */
  getOrSet<T>(key: Key, loader: Loader<T & StorableValue<T, S>>, options?: GetOrSetOptions): Promise<T | undefined>
  // -- Many keys at once, memoize (Python's get_many, set_many, delete_many, cached)
  /** The values of the keys that are present, by key as given; absent keys are left out. */
  getMany<T = ValueOf<S>>(keys: Iterable<Key>): Joined<R, Map<Key, T>>
  /** Stores every entry; bad input anywhere writes nothing. */
  setMany<V>(entries: Entries<V & StorableValue<V, S>>, options?: SetOptions): Joined<R, void>
  /** Removes every key for every process; how many held a value. */
  deleteMany(keys: Iterable<Key>): Joined<R, number>
  /** `fn` with its results cached, keyed by its name and arguments (Python's `cached`). */
  memoize<A extends unknown[], R>(
    fn: (...args: A) => (R & StorableValue<R, S>) | undefined | null | Promise<(R & StorableValue<R, S>) | undefined | null>,
    options?: MemoizeOptions<A>,
  ): Memoized<A, R>
  /** Empties the cache (a namespace: voids its entries), for every process of the host. */
  clear(): Joined<R, void>
}

/** A cache shared by every process of the host (Node.js or Python) that opens the same name. */
export interface Cache<S extends Serializer = 'auto', R extends Redis | undefined = undefined> extends Keys<S, R> {}
export declare class Cache<S extends Serializer = 'auto', R extends Redis | undefined = undefined> {
  constructor(name: string, options?: CacheOptions<S, R>)
  /** The cache's name. */
  readonly name: string
  /** Whether the cache runs without its shared segment. */
  readonly degraded: boolean
  /** Why the segment cannot be used (naming the file and the remedy), or null. */
  readonly degradedReason: string | null
  /** The same as a short name (missing_directory, not_writable, no_space, ...), or null. */
  readonly degradedCause: string | null
  /** Voids every entry carrying any of the tags. */
  invalidateTags(...tags: string[] | [readonly string[]]): Joined<R, void>
  /** Keys under `prefix + ':'`, cleared together. */
  namespace(prefix: string): Namespace<S, R>
  /** This process's counters and the host segment's figures. */
  stats(): Stats
  /** Detaches this process; every later call throws. */
  close(): void
  /**
   * close(), for `using`.
   *
   * @example
   * { using cache = new Cache('jobs'); cache.set('a', 1) } // closed as the block ends
   */
  [Symbol.dispose](): void
  /** Removes the cache's files. */
  unlink(): void
}

/** Keys under a prefix of one cache, cleared together. */
export interface Namespace<S extends Serializer = 'auto', R extends Redis | undefined = undefined> extends Keys<S, R> {}
export declare class Namespace<S extends Serializer = 'auto', R extends Redis | undefined = undefined> {
  /** The namespace's name. */
  readonly prefix: string
}

/** A failure of the cache itself: a refused or damaged segment, a lock timeout, a closed cache. */
export declare class ZigguratError extends Error {}

/** Another caller's load did not finish within loaderTimeout. */
export declare class LoadTimeoutError extends ZigguratError {}

/** `new Cache(..., { degraded: 'raise' })` found the segment unusable; `code` names the cause. */
export declare class SegmentError extends ZigguratError {
  code: string
}
