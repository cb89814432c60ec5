// Types of the ziggurat package's ES module entry: index.js re-exports the
// classes of the CommonJS entry (cache.cjs), so its types are those of
// index.d.cts, declared once there.
export * from './index.cjs'
