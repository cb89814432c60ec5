// Types of the HTTP response cache (ES module and CommonJS entries alike).
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Cache } from './index.cjs'

/** The settings of an HttpCache (docs/node.md, "HTTP response cache"). */
export interface HttpCacheOptions {
  /** Hosts whose requests are cached (".example.com": the domain and its subdomains; "*": any). Default ['localhost', '127.0.0.1', '[::1]']. */
  allowedHosts?: readonly string[]
  /** The largest body stored, bytes; larger responses pass uncached. Default 1048576. */
  maxBody?: number
  /** Whether the request's Cache-Control and Pragma are obeyed. Default true. */
  requestDirectives?: boolean
  /** The response header naming a response's tags, never sent on. Default 'cache-tag'. */
  tagHeader?: string
  /** Whether responses carry a Cache-Status line (RFC 9211). Default true. */
  cacheStatus?: boolean
  /** Seconds a response without freshness information is kept; null: not stored. Default null. */
  defaultTtl?: number | null
  /** Whether the heuristic freshness of RFC 9111 §4.2.2 applies. Default false. */
  heuristic?: boolean
  /** Whether responses with Set-Cookie are stored. Default false. */
  storeSetCookie?: boolean
  /** Whether responses to requests with Authorization are stored when they say must-revalidate. Default false. */
  storeAuthMustRevalidate?: boolean
  /** Request headers whose presence bypasses the cache. Default: the X-Forwarded-* family and its kin. */
  bypassHeaders?: readonly string[]
  /** Cookie names whose presence bypasses the cache. Default []. */
  bypassCookies?: readonly string[]
  /** Request headers that are part of every key. Default []. */
  keyHeaders?: readonly string[]
  /** Seconds a URL whose fill stored nothing is not waited on. Default 10. */
  hitForMiss?: number
  /** Seconds a stale response is kept for revalidation past its freshness. Default 60. */
  revalidateKeep?: number
  /** The token a PURGE must carry in Purge-Token (at least 16 characters); null: PURGE off. Default null. */
  purgeToken?: string | null
  /** Addresses a PURGE is taken from. Default ['127.0.0.1', '::1']. */
  purgeClients?: readonly string[]
  /** Targeted cache-control fields obeyed, first match wins (RFC 9213). Default ['ziggurat-cache-control', 'cdn-cache-control']. */
  targetedFields?: readonly string[]
  /** Targeted fields sent on with the response. Default ['cdn-cache-control']. */
  targetedForward?: readonly string[]
  /** Seconds a stale response may answer when the app fails, on top of what responses allow. Default null. */
  staleIfError?: number | null
  /** Seconds to wait for the app's head before serving a stale response that may serve; null: wait. Default null. */
  appTimeout?: number | null
  /** Whether Surrogate-Control is obeyed (and Surrogate-Capability sent to the app). Default false. */
  surrogateControl?: boolean
  /** Where warnings go (an Error named ZigguratWarning); default process.emitWarning. */
  onWarning?: (warning: Error) => void
}

/** A node:http request handler. */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => unknown

/** The HTTP response cache of one site on a ziggurat Cache, shared by every process of the host. */
export declare class HttpCache {
  constructor(cache: Cache, options?: HttpCacheOptions)
  /** The settings in effect. */
  readonly options: Readonly<Required<Omit<HttpCacheOptions, 'onWarning'>>>
  readonly cache: Cache
  /** `app` behind the cache, as a node:http request handler. */
  handler(app: NodeHandler): (req: IncomingMessage, res: ServerResponse) => void
  /** Express (or Connect) middleware: the routes after it are the app. */
  express(): (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void
  /** A Fastify plugin putting every route behind the cache. */
  fastify(): (instance: any, opts: unknown, done: (err?: Error) => void) => void
  /** `app` behind the cache, as a WHATWG fetch handler. */
  fetch<A extends unknown[]>(app: (request: Request, ...rest: A) => Response | Promise<Response>): (request: Request, ...rest: A) => Promise<Response>
  /** Removes the stored responses of an absolute URL in every process of the host; whether something was stored. */
  purge(url: string): boolean
  /** Voids every stored response carrying any of the tags, in every process of the host. */
  invalidateTags(...tags: Array<string | readonly string[]>): void
}
export default HttpCache
