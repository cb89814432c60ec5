// The timing method of the Node.js benchmarks, the same as bench/harness.py's:
// each case's loop count is calibrated to a rep of about `repMs`, the reps of
// a table run interleaved round-robin (the order rotates each round), and a
// figure is the median of its reps with their min-max as the spread. Ratios
// are medians of per-round ratios, so a drift of the machine's speed that
// lasts longer than a round cancels out.

/** The median of `xs`. */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

/** Median, min and max of the reps. */
export function summary(xs) {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length }
}

/**
 * A case: `run(n)` does n operations (sync or async) and returns nothing;
 * `samples` get ns per operation, one per rep.
 */
export function kase(name, run, { fixed } = {}) {
  return { name, run, loops: fixed ?? 0, fixed: fixed !== undefined, samples: [] }
}

async function timed(c, n) {
  const t0 = process.hrtime.bigint()
  const r = c.run(n)
  if (r && typeof r.then === 'function') await r
  return Number(process.hrtime.bigint() - t0)
}

async function calibrate(c, repMs) {
  if (c.fixed) return
  let n = 16
  for (;;) {
    const ns = await timed(c, n)
    if (ns > repMs * 1e6 * 0.25 || n > 1e9) {
      c.loops = Math.max(1, Math.round((n * repMs * 1e6) / Math.max(ns, 1)))
      return
    }
    n *= 4
  }
}

/** Runs `reps` interleaved rounds of `cases`; fills each case's `samples` (ns per op). */
export async function interleave(cases, { reps, repMs }) {
  for (const c of cases) {
    await calibrate(c, repMs)
    await timed(c, c.loops) // warm the calibrated loop once
  }
  for (let r = 0; r < reps; r++) {
    for (let i = 0; i < cases.length; i++) {
      const c = cases[(i + r) % cases.length]
      c.samples.push((await timed(c, c.loops)) / c.loops)
    }
  }
  return cases
}

/** Median over rounds of a/b, pairing the reps of one round. */
export function paired(a, b) {
  return median(a.samples.map((x, i) => x / b.samples[i]))
}

/** Min and max over rounds of a/b. */
export function pairedRange(a, b) {
  const rs = a.samples.map((x, i) => x / b.samples[i])
  return [Math.min(...rs), Math.max(...rs)]
}

/**
 * Ratios of `a` to `b` from `rounds` short reps run back to back (which runs
 * first alternates), as bench/harness.py's alternate(): for a goal that
 * compares two cases closely, each pair sees the same machine, and the
 * median over many rounds leaves out the few that straddle a change of its
 * speed. Returns the ratios, round by round.
 */
export async function alternate(a, b, { rounds, pairMs }) {
  const pa = { ...a, loops: 0, fixed: false, samples: [] }
  const pb = { ...b, loops: 0, fixed: false, samples: [] }
  await calibrate(pa, pairMs)
  await calibrate(pb, pairMs)
  const out = []
  for (let r = 0; r < rounds; r++) {
    const ns = {}
    for (const c of r % 2 ? [pb, pa] : [pa, pb]) ns[c.name] = (await timed(c, c.loops)) / c.loops
    out.push(ns[a.name] / ns[b.name])
  }
  return out
}
