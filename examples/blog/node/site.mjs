// The blog itself, independent of the server and of the page cache: routes,
// pages, their groups and what each change purges, as the Python blog
// (examples/blog/site.py) has them:
//
//   page                 tags          a new post purges lists, archive, feed, tags
//   /, /page/N           lists         and its tags' pages (no post page); an edit
//   /posts/<slug>        post:<id>     purges lists, the pages of its old and new
//   /archive             archive       tags (tags when they changed) and the post;
//   /tags/               tags          a comment purges lists (they show comment
//   /tags/<tag>          tag:<tag>     counts) and that post only.
//   /feed.atom           feed
//   /about               about
import { createHash, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Mustache from 'mustache'

const HERE = dirname(fileURLToPath(import.meta.url))
const PAGE_SIZE = 5
// Browsers revalidate every time; a shared cache keeps pages an hour, purged on change.
export const CACHE_CONTROL = 'public, max-age=0, s-maxage=3600'
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December']
const templates = Object.fromEntries(
  ['layout', 'summary', 'list', 'post', 'archive', 'tags', 'tag', 'feed', 'about'].map((n) => [
    n,
    readFileSync(join(HERE, 'templates', `${n}.mustache`), 'utf8'),
  ]),
)

const two = (n) => String(n).padStart(2, '0')
/** "05 January 2026", as the Python blog prints a day. */
const day = (d) => `${two(d.getUTCDate())} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`
const iso = (d) => d.toISOString().replace(/\.\d+Z$/, '+00:00')
const escape = (s) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])

/** A post's text as HTML: paragraphs, and fenced code blocks as they are. */
export function bodyHtml(text) {
  const out = []
  const fence = /```([\w+-]*)\n([\s\S]*?)\n```/g
  let pos = 0
  const paragraphs = (t) => t.split('\n\n').filter((p) => p.trim()).map((p) => `<p>${escape(p.trim())}</p>`)
  for (const m of text.matchAll(fence)) {
    out.push(...paragraphs(text.slice(pos, m.index)))
    out.push(`<pre class="code"><code class="language-${escape(m[1])}">${escape(m[2])}</code></pre>`)
    pos = m.index + m[0].length
  }
  out.push(...paragraphs(text.slice(pos)))
  return out.join('\n')
}

function summary(p) {
  return { slug: p.slug, title: p.title, created: day(p.created), comments: p.comments, oneComment: p.comments === 1, tags: p.tags }
}

const tagGroups = (p) => p.tags.map((t) => `tag:${t}`)

export class Blog {
  /**
   * @param store the posts and comments (store.mjs)
   * @param purger what a change purges through: `invalidateTags(...groups)`
   * @param adminToken the token of the changes made by the admin
   */
  constructor(store, purger, adminToken, title = 'Ziggurat notes') {
    this.store = store
    this.purger = purger
    this.adminToken = Buffer.from(adminToken)
    this.title = title
  }

  page(template, groups, view, { title, status = 200, type = 'text/html; charset=utf-8' } = {}) {
    const partials = { summary: templates.summary }
    const inner = Mustache.render(templates[template], { blogTitle: this.title, ...view }, partials)
    const html = template === 'feed' ? inner : Mustache.render(templates.layout, { blogTitle: this.title, title, main: inner })
    const body = Buffer.from(html)
    const etag = `"${createHash('blake2b512').update(body).digest('hex').slice(0, 20)}"`
    return {
      status,
      headers: [
        ['Content-Type', type],
        ['Cache-Control', CACHE_CONTROL],
        ['ETag', etag],
        ['Cache-Tag', groups.join(', ')],
      ],
      body,
    }
  }

  redirect(location) {
    return { status: 303, headers: [['Location', location], ['Cache-Control', 'no-store']], body: Buffer.alloc(0) }
  }

  text(status, text) {
    return { status, headers: [['Content-Type', 'text/plain'], ['Cache-Control', 'no-store']], body: Buffer.from(text) }
  }

  /** The response to `req` ({ method, path, form, headers }). */
  async handle(req) {
    const p = req.path
    let m
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (p === '/') return this.listPage(1)
      if ((m = /^\/page\/(\d{1,6})$/.exec(p))) return this.listPage(Number(m[1]))
      if ((m = /^\/posts\/([a-z0-9-]+)$/.exec(p))) return this.postPage(m[1])
      if (p === '/archive') return this.archive()
      if (p === '/tags/') {
        const tags = (await this.store.allTags()).map(([name, count]) => ({ name, count }))
        return this.page('tags', ['tags'], { tags }, { title: 'Tags' })
      }
      if ((m = /^\/tags\/([a-z0-9_-]+)$/.exec(p))) {
        const posts = (await this.store.tagged(m[1])).map(summary)
        return this.page('tag', [`tag:${m[1]}`], { tag: m[1], posts }, { title: m[1] })
      }
      if (p === '/feed.atom') return this.feed()
      if (p === '/about') return this.page('about', ['about'], {}, { title: 'About' })
      return this.text(404, 'not found')
    }
    if (req.method === 'POST') {
      if ((m = /^\/posts\/([a-z0-9-]+)\/comments$/.exec(p))) return this.comment(m[1], req.form)
      if (p === '/admin/posts') return this.newPost(req)
      if ((m = /^\/admin\/posts\/(\d+)$/.exec(p))) return this.editPost(Number(m[1]), req)
      return this.text(404, 'not found')
    }
    return this.text(405, 'method not allowed')
  }

  async listPage(number) {
    const total = await this.store.count()
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE))
    if (number < 1 || number > pages) return this.text(404, 'no such page')
    const posts = (await this.store.page(number, PAGE_SIZE)).map(summary)
    const newer = number > 1 ? (number === 2 ? '/' : `/page/${number - 1}`) : null
    const older = number < pages ? `/page/${number + 1}` : null
    return this.page('list', ['lists'], { posts, number, pages, newer, older })
  }

  async postPage(slug) {
    const p = await this.store.bySlug(slug)
    if (p === null) return this.text(404, 'no such post')
    const comments = await this.store.comments(p.id)
    const post = {
      slug: p.slug,
      title: p.title,
      created: day(p.created),
      edited: p.updated.getTime() !== p.created.getTime() ? day(p.updated) : null,
      tags: p.tags,
      html: bodyHtml(p.body),
    }
    const list = comments.map((c) => ({
      author: c.author,
      body: c.body,
      created: `${day(c.created)} ${two(c.created.getUTCHours())}:${two(c.created.getUTCMinutes())}`,
    }))
    return this.page('post', [`post:${p.id}`], { post, comments: list, count: list.length, oneComment: list.length === 1 }, { title: p.title })
  }

  async archive() {
    const months = []
    for (const p of await this.store.all()) {
      const month = `${MONTHS[p.created.getUTCMonth()]} ${p.created.getUTCFullYear()}`
      if (months.length === 0 || months.at(-1).month !== month) months.push({ month, posts: [] })
      months.at(-1).posts.push({ slug: p.slug, title: p.title, day: `${two(p.created.getUTCDate())} ${MONTHS[p.created.getUTCMonth()].slice(0, 3)}` })
    }
    return this.page('archive', ['archive'], { months }, { title: 'Archive' })
  }

  async feed() {
    const posts = await this.store.page(1, 20)
    const view = {
      updated: posts.length ? iso(posts[0].updated) : '1970-01-01T00:00:00+00:00',
      posts: posts.map((p) => ({ id: p.id, slug: p.slug, title: p.title, createdIso: iso(p.created), updatedIso: iso(p.updated), tags: p.tags, html: bodyHtml(p.body) })),
    }
    return this.page('feed', ['feed'], view, { type: 'application/atom+xml' })
  }

  admin(req) {
    const given = Buffer.from(req.headers['x-admin-token'] ?? req.form.token ?? '')
    return given.length === this.adminToken.length && timingSafeEqual(given, this.adminToken)
  }

  async newPost(req) {
    if (!this.admin(req)) return this.text(403, 'forbidden')
    const f = req.form
    if (!f.title || !f.body) return this.text(400, 'title and body are required')
    const p = await this.store.addPost(f.title, f.body, f.tags ?? '')
    await this.purger.invalidateTags('lists', 'archive', 'feed', 'tags', ...tagGroups(p))
    return this.redirect(`/posts/${encodeURIComponent(p.slug)}`)
  }

  async editPost(id, req) {
    if (!this.admin(req)) return this.text(403, 'forbidden')
    const old = await this.store.byId(id)
    if (old === null) return this.text(404, 'no such post')
    const f = req.form
    const [before, after] = await this.store.editPost(id, f.title || old.title, f.body || old.body, f.tags ?? old.tags.join(','))
    const groups = new Set(['lists', `post:${id}`, ...tagGroups(before), ...tagGroups(after)])
    if (before.tags.join() !== after.tags.join()) groups.add('tags')
    await this.purger.invalidateTags(...[...groups].sort())
    return this.redirect(`/posts/${encodeURIComponent(after.slug)}`)
  }

  async comment(slug, form) {
    const p = await this.store.bySlug(slug)
    if (p === null) return this.text(404, 'no such post')
    const author = (form.author ?? '').trim().slice(0, 80)
    const body = (form.body ?? '').trim().slice(0, 4000)
    if (!author || !body) return this.text(400, 'author and comment are required')
    await this.store.addComment(p.id, author, body)
    await this.purger.invalidateTags('lists', `post:${p.id}`)
    return this.redirect(`/posts/${encodeURIComponent(p.slug)}#comments`)
  }
}
