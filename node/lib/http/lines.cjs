'use strict'
// Header lines as flat arrays (name, value, name, value…), the form the crate
// gives and node:http's writeHead() takes.

/**
 * Whether the flat `lines` name a field twice. writeHead() with a flat array
 * keeps repeated lines only when no header was set before it; past a
 * setHeader() (an app's, a framework's) it keeps the last of each name.
 */
function repeats(lines) {
  const n = lines.length
  for (let i = 2; i < n; i += 2) {
    for (let j = 0; j < i; j += 2) if (lines[i] === lines[j]) return true
  }
  return false
}

/**
 * Writes the head `status` and flat `lines` to `res` with `writeHead` (the
 * response's own, or the one a capture holds): repeated lines are kept
 * however the response was used before.
 */
function writeLines(res, writeHead, status, lines) {
  if (!repeats(lines)) return writeHead.call(res, status, lines)
  const grouped = new Map()
  for (let i = 0; i < lines.length; i += 2) {
    const v = grouped.get(lines[i])
    if (v === undefined) grouped.set(lines[i], [lines[i + 1]])
    else v.push(lines[i + 1])
  }
  for (const [k, v] of grouped) res.setHeader(k, v.length === 1 ? v[0] : v)
  return writeHead.call(res, status)
}

module.exports = { repeats, writeLines }
