// The posts, from the data service at DATA_URL (the demo's), through Next.js's fetch
// cache with tags: 'posts' and 'post:<id>'. Every render is logged to RENDER_LOG, so
// the demo can count renders per page.
import { appendFileSync } from 'node:fs'

export async function post(id) {
  const res = await fetch(`${process.env.DATA_URL}/posts/${id}`, {
    next: { tags: ['posts', `post:${id}`], revalidate: 3600 },
  })
  return res.json()
}

export function rendered(page) {
  if (process.env.RENDER_LOG) appendFileSync(process.env.RENDER_LOG, `${process.pid} ${page}\n`)
}
