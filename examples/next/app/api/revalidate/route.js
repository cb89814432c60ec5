// POST /api/revalidate?tag=post:1 revalidates a tag (in every instance, with ziggurat).
import { revalidateTag } from 'next/cache'

export async function POST(request) {
  const tag = new URL(request.url).searchParams.get('tag')
  if (!tag) return Response.json({ error: 'give ?tag=' }, { status: 400 })
  revalidateTag(tag, { expire: 0 })
  return Response.json({ revalidated: tag, by: process.pid })
}
