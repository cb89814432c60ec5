// Types of ziggurat/http's ES module entry (http.js re-exports http.cjs), declared once
// in http.d.cts; its default export is the HttpCache class.
export * from './http.cjs'
import { HttpCache } from './http.cjs'
export default HttpCache
