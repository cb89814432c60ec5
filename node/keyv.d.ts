// Types of ziggurat/keyv's ES module entry (keyv.js re-exports keyv.cjs), declared once
// in keyv.d.cts.
export * from './keyv.cjs'
