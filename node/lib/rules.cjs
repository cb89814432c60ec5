'use strict'
// The Cache's rules the package applies on its own side (tag limits, option
// defaults, mode names, step kinds, value codes, the JSON depth, metric
// labels), read once, at load, from the addon's table of ziggurat-cache's
// rules, so that each has one home, shared with the Python package.

const native = require('./native.cjs')

/** Every rule by its dotted name ('tags.max', 'defaults.ttl', 'steps.HIT', ...). */
const RULES = Object.freeze(native.rules())

/** The rules of one group, by the name after the group's ('defaults' → { ttl, ... }). */
function group(name) {
  const prefix = `${name}.`
  const out = {}
  for (const [k, v] of Object.entries(RULES)) {
    if (k.startsWith(prefix)) out[k.slice(prefix.length)] = v
  }
  return Object.freeze(out)
}

/**
 * The option defaults, under the crate's (snake_case) names.
 *
 * @example
 * DEFAULTS.ttl // 300
 */
const DEFAULTS = group('defaults')
/** The steps of a miss (`MissState.step`): HIT, LOAD, WAIT, LOCAL. */
const STEPS = group('steps')
/** What a read found, or how a value is encoded (meta word 0). */
const CODES = group('codes')
/** Mode names: degraded, copy, huge_pages. */
const MODES = group('modes')
/** Metric labels and the tier label's values. */
const METRICS = group('metrics')

module.exports = {
  RULES,
  DEFAULTS,
  STEPS,
  CODES,
  MODES,
  METRICS,
  MAX_TAGS: RULES['tags.max'],
  MIN_TAG_BYTES: RULES['tags.min_bytes'],
  MAX_DEPTH: RULES['envelope.max_depth'],
}
