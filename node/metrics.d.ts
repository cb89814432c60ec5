// Types of ziggurat/metrics's ES module entry (metrics.js re-exports metrics.cjs), declared once
// in metrics.d.cts.
export * from './metrics.cjs'
