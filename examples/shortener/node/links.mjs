// The shortener's link store in PostgreSQL, as the Python app's db.py keeps it: the same
// table, the same queries, and a per-process count of the queries sent, so that the demo
// can show how many of them the cache saves, whichever language served the lookup.

import pg from 'pg'

export const TABLE = 'shortener_links'

/** A slug that is taken already (the INSERT hit the primary key). */
export class SlugTaken extends Error {}

const UNIQUE_VIOLATION = '23505'
const DUPLICATE_TABLE = '42P07'

/**
 * One worker's connection to the link store, with its query counters.
 *
 * @example
 * const links = await Links.open('postgresql://postgres@127.0.0.1:5432/links')
 * await links.target('zig') // 'https://example.com/ziggurat', or null
 */
export class Links {
  #pool
  reads = 0
  writes = 0

  constructor(pool) {
    this.#pool = pool
  }

  /** Connects to `url` (postgresql://...) and creates the table if it is missing. */
  static async open(url) {
    if (!/^postgres(ql)?:\/\//.test(url)) {
      throw new RangeError(
        `Links.open(): url must be a postgresql:// URL (the Node.js app runs on PostgreSQL only), got ${JSON.stringify(url)}`,
      )
    }
    // One connection per worker, as each Python worker has: the queries of concurrent
    // requests wait for it in turn (a pool of one queues them; a bare Client would too, but
    // pg 8 deprecates overlapping calls on one Client).
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    // A connection that breaks while idle (the server stopped) is replaced on the next
    // query; without a listener the pool's 'error' event would end the worker.
    pool.on('error', (e) => console.error(`PostgreSQL connection lost: ${e.message}`))
    try {
      await pool.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (slug TEXT PRIMARY KEY, target TEXT NOT NULL)`)
    } catch (e) {
      // Another worker created it at the same moment.
      if (e.code !== UNIQUE_VIOLATION && e.code !== DUPLICATE_TABLE) throw e
    }
    return new Links(pool)
  }

  get queries() {
    return this.reads + this.writes
  }

  /** The target of `slug`, or null if there is no such link (one query). */
  async target(slug) {
    this.reads++
    // A named statement is prepared once per connection, as psycopg prepares a repeated query.
    const { rows } = await this.#pool.query({
      name: 'target',
      text: `SELECT target FROM ${TABLE} WHERE slug = $1`,
      values: [slug],
    })
    return rows.length === 0 ? null : rows[0].target
  }

  /** Inserts a new link; throws SlugTaken if the slug exists (one query). */
  async create(slug, target) {
    this.writes++
    try {
      await this.#pool.query({
        name: 'create',
        text: `INSERT INTO ${TABLE} (slug, target) VALUES ($1, $2)`,
        values: [slug, target],
      })
    } catch (e) {
      if (e.code === UNIQUE_VIOLATION) throw new SlugTaken(slug)
      throw e
    }
  }

  /** Changes the target of an existing link; false if there is none (one query). */
  async update(slug, target) {
    this.writes++
    const r = await this.#pool.query({
      name: 'update',
      text: `UPDATE ${TABLE} SET target = $1 WHERE slug = $2`,
      values: [target, slug],
    })
    return r.rowCount > 0
  }

  async close() {
    await this.#pool.end()
  }
}
