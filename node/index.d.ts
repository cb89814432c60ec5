// Types of the ziggurat package's ES module entry: index.js re-exports the
// classes of the CommonJS entry (cache.cjs), so its types are those of
// index.d.cts, declared once there; its default export is that module.
export * from './index.cjs'
import * as ziggurat from './index.cjs'
export default ziggurat
