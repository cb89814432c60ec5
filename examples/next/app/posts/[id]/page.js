// An ISR page: rendered on its first request, kept an hour, revalidated by tag.
import { post, rendered } from '../../data'

export const revalidate = 3600
export const dynamicParams = true

export async function generateStaticParams() {
  return []
}

export default async function Post({ params }) {
  const { id } = await params
  const p = await post(id)
  rendered(`/posts/${id}`)
  return (
    <article>
      <h1>{p.title}</h1>
      <p id="version">version {p.version}</p>
      <p id="served">rendered by {process.pid}</p>
    </article>
  )
}
