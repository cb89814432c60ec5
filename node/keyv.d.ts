// Types of ziggurat/keyv's ES module entry (keyv.js re-exports keyv.cjs), declared once
// in keyv.d.cts; its default export is the adapter class.
export * from './keyv.cjs'
import { KeyvZiggurat } from './keyv.cjs'
export default KeyvZiggurat
