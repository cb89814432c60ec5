// Next.js's caches on ziggurat: one entry. NEXT_CACHE=default keeps Next.js's own
// per-instance cache, for comparison (the demo runs both).
import { withZiggurat } from 'ziggurat/next'

const config = {
  // Each instance of the demo builds nothing of its own: one build, several `next start`.
  output: undefined,
}

export default process.env.NEXT_CACHE === 'default'
  ? config
  : withZiggurat(config, { name: process.env.ZIGGURAT_NEXT_CACHE ?? 'next-example', size: '128MiB' })
