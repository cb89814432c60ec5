// The blog's data in PostgreSQL: the tables the Python blog uses (blog_posts,
// blog_comments; examples/blog/store.py makes and seeds them), one connection
// per worker process.
import pg from 'pg'

const COLS =
  'p.id, p.slug, p.title, p.body, p.tags, p.created, p.updated, ' +
  '(SELECT COUNT(*) FROM blog_comments c WHERE c.post_id = p.id) AS comments'

/** A post row as the pages use it. */
function post(r) {
  return {
    id: Number(r.id),
    slug: r.slug,
    title: r.title,
    body: r.body,
    tags: r.tags.split(',').filter(Boolean),
    created: new Date(r.created),
    updated: new Date(r.updated),
    comments: Number(r.comments),
  }
}

/** The slug of a title: lower-case words joined by '-'. */
export function slugify(title) {
  return (
    title
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '') || 'post'
  )
}

/** Tags from a comma- or space-separated list: lower-case, each once, sorted. */
export function tagList(raw) {
  return [...new Set(raw.split(/[,\s]+/).map((t) => t.trim().toLowerCase()).filter(Boolean))].sort()
}

export class Store {
  constructor(url) {
    this.client = new pg.Client({ connectionString: url })
  }

  connect() {
    return this.client.connect()
  }

  async count() {
    const r = await this.client.query('SELECT COUNT(*) AS n FROM blog_posts')
    return Number(r.rows[0].n)
  }

  async page(number, size) {
    const r = await this.client.query(`SELECT ${COLS} FROM blog_posts p ORDER BY p.created DESC, p.id DESC LIMIT $1 OFFSET $2`, [
      size,
      (number - 1) * size,
    ])
    return r.rows.map(post)
  }

  async all() {
    const r = await this.client.query(`SELECT ${COLS} FROM blog_posts p ORDER BY p.created DESC, p.id DESC`)
    return r.rows.map(post)
  }

  async bySlug(slug) {
    const r = await this.client.query(`SELECT ${COLS} FROM blog_posts p WHERE p.slug = $1`, [slug])
    return r.rows.length ? post(r.rows[0]) : null
  }

  async byId(id) {
    const r = await this.client.query(`SELECT ${COLS} FROM blog_posts p WHERE p.id = $1`, [id])
    return r.rows.length ? post(r.rows[0]) : null
  }

  async tagged(tag) {
    return (await this.all()).filter((p) => p.tags.includes(tag))
  }

  async allTags() {
    const counts = new Map()
    for (const p of await this.all()) for (const t of p.tags) counts.set(t, (counts.get(t) ?? 0) + 1)
    return [...counts].sort(([a], [b]) => (a < b ? -1 : 1))
  }

  async comments(postId) {
    const r = await this.client.query('SELECT author, body, created FROM blog_comments WHERE post_id = $1 ORDER BY id', [postId])
    return r.rows.map((c) => ({ author: c.author, body: c.body, created: new Date(c.created) }))
  }

  async addPost(title, body, tags) {
    const now = new Date().toISOString().replace(/\.\d+Z$/, '+00:00')
    const base = slugify(title)
    let slug = base
    for (let n = 2; (await this.client.query('SELECT 1 FROM blog_posts WHERE slug = $1', [slug])).rows.length; n++) slug = `${base}-${n}`
    const r = await this.client.query(
      'INSERT INTO blog_posts (slug, title, body, tags, created, updated) VALUES ($1, $2, $3, $4, $5, $5) RETURNING id',
      [slug, title, body, tagList(tags).join(','), now],
    )
    return this.byId(Number(r.rows[0].id))
  }

  /** The post before and after the edit, or null when there is none. */
  async editPost(id, title, body, tags) {
    const before = await this.byId(id)
    if (before === null) return null
    const now = new Date().toISOString().replace(/\.\d+Z$/, '+00:00')
    await this.client.query('UPDATE blog_posts SET title = $1, body = $2, tags = $3, updated = $4 WHERE id = $5', [
      title,
      body,
      tagList(tags).join(','),
      now,
      id,
    ])
    return [before, await this.byId(id)]
  }

  async addComment(postId, author, body) {
    const now = new Date().toISOString().replace(/\.\d+Z$/, '+00:00')
    await this.client.query('INSERT INTO blog_comments (post_id, author, body, created) VALUES ($1, $2, $3, $4)', [postId, author, body, now])
  }

  close() {
    return this.client.end()
  }
}
