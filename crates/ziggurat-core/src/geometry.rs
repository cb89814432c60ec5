//! The geometry of a segment: the sizes and offsets of its tables, shards
//! and rings, derived once from the byte budget (`Geometry::compute`), and
//! the check that holds a file's header to that same rule on attach.
//!
//! The byte-level description is in docs/format.md; keep the two in step.

use crate::error::{Error, OpenCause, Result};
use crate::invalid::{Arg, Layout, Problem};
use crate::layout::{GHOST_CELLS, HEADER_SIZE, MAX_KEY, MAX_SIZE, MIN_SIZE, SHARD_HDR};

/// The sizes and offsets of a segment, derived once from its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of the file.
    pub(crate) file_size: u64,
    /// Number of shards (a power of two).
    pub(crate) nshards: u32,
    /// Index bucket pairs per shard.
    pub(crate) npairs: u32,
    /// Stamp words in the stamp table (a multiple of `nshards`).
    pub(crate) nstamps: u32,
    /// Tag cells in the tag table.
    pub(crate) ntags: u32,
    /// Bytes of each shard's small ring.
    pub(crate) small_cap: u64,
    /// Bytes of each shard's main ring.
    pub(crate) main_cap: u64,
    /// Ghost buckets per shard.
    pub(crate) ghost_buckets: u32,
    /// Longest key, in bytes.
    pub(crate) max_key: u32,
    /// Longest value, in bytes.
    pub(crate) max_value: u32,
    /// File offset of the stamp table.
    pub(crate) stamps_off: u64,
    /// File offset of the tag table.
    pub(crate) tags_off: u64,
    /// File offset of shard 0.
    pub(crate) shards_off: u64,
    /// Bytes from one shard to the next.
    pub(crate) shard_stride: u64,
    /// Offset of a shard's index from the shard's start.
    pub(crate) index_rel: u64,
    /// Offset of a shard's ghost table from the shard's start.
    pub(crate) ghost_rel: u64,
    /// Offset of a shard's small ring from the shard's start.
    pub(crate) small_rel: u64,
    /// Offset of a shard's main ring from the shard's start.
    pub(crate) main_rel: u64,
}

/// The sizes and offsets, to read (the engine alone lays them out).
/// `Ok` if `avg_item` bytes (the expected entry size, which sizes the
/// index) is within 32 B to 16 MiB.
pub(crate) fn check_avg_item(avg_item: i128) -> Result<()> {
    if !(32..=1 << 24).contains(&avg_item) {
        return Err(Error::invalid(
            Arg::AvgItemSize,
            Problem::Range {
                min: 32,
                max: 1 << 24,
                got: avg_item,
            },
        ));
    }
    Ok(())
}

impl Geometry {
    /// Bytes of the file.
    #[inline]
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Number of shards (a power of two).
    #[inline]
    pub fn nshards(&self) -> u32 {
        self.nshards
    }

    /// Index bucket pairs per shard.
    #[inline]
    pub fn npairs(&self) -> u32 {
        self.npairs
    }

    /// Stamp words in the stamp table (a multiple of `nshards`).
    #[inline]
    pub fn nstamps(&self) -> u32 {
        self.nstamps
    }

    /// Tag cells in the tag table.
    #[inline]
    pub fn ntags(&self) -> u32 {
        self.ntags
    }

    /// Bytes of each shard's small ring.
    #[inline]
    pub fn small_cap(&self) -> u64 {
        self.small_cap
    }

    /// Bytes of each shard's main ring.
    #[inline]
    pub fn main_cap(&self) -> u64 {
        self.main_cap
    }

    /// Ghost buckets per shard.
    #[inline]
    pub fn ghost_buckets(&self) -> u32 {
        self.ghost_buckets
    }

    /// Longest key, in bytes.
    #[inline]
    pub fn max_key(&self) -> u32 {
        self.max_key
    }

    /// Longest value, in bytes.
    #[inline]
    pub fn max_value(&self) -> u32 {
        self.max_value
    }

    /// File offset of the stamp table.
    #[inline]
    pub fn stamps_off(&self) -> u64 {
        self.stamps_off
    }

    /// File offset of the tag table.
    #[inline]
    pub fn tags_off(&self) -> u64 {
        self.tags_off
    }

    /// File offset of shard 0.
    #[inline]
    pub fn shards_off(&self) -> u64 {
        self.shards_off
    }

    /// Bytes from one shard to the next.
    #[inline]
    pub fn shard_stride(&self) -> u64 {
        self.shard_stride
    }

    /// Offset of a shard's index from the shard's start.
    #[inline]
    pub fn index_rel(&self) -> u64 {
        self.index_rel
    }

    /// Offset of a shard's ghost table from the shard's start.
    #[inline]
    pub fn ghost_rel(&self) -> u64 {
        self.ghost_rel
    }

    /// Offset of a shard's small ring from the shard's start.
    #[inline]
    pub fn small_rel(&self) -> u64 {
        self.small_rel
    }

    /// Offset of a shard's main ring from the shard's start.
    #[inline]
    pub fn main_rel(&self) -> u64 {
        self.main_rel
    }
}

fn align(x: u64, a: u64) -> Option<u64> {
    x.div_ceil(a).checked_mul(a)
}

fn largest_pow2_le(x: u64) -> u64 {
    if x == 0 {
        1
    } else {
        1u64 << (63 - x.leading_zeros())
    }
}

/// Fewest bytes of rings a shard has.
const MIN_ARENA: u64 = 64 * 1024;

/// File offsets of the stamp table, the tag table and shard 0 for tables of
/// `nstamps` and `ntags` cells: the one placement rule that [`Geometry::compute`]
/// follows and [`Geometry::check`] holds a header to. `None` on overflow.
fn tables(nstamps: u32, ntags: u32) -> Option<(u64, u64, u64)> {
    let stamps_off = HEADER_SIZE as u64;
    let tags_off = align(stamps_off.checked_add(4 * nstamps as u64)?, 64)?;
    let shards_off = align(tags_off.checked_add(4 * ntags as u64)?, 4096)?;
    Some((stamps_off, tags_off, shards_off))
}

/// The regions of one shard of `stride` bytes, relative to its start: header,
/// index, ghost table, then the two rings sharing the rest a tenth to nine.
#[derive(Debug, PartialEq, Eq)]
struct ShardLayout {
    index_rel: u64,
    ghost_rel: u64,
    small_rel: u64,
    small_cap: u64,
    main_cap: u64,
    main_rel: u64,
}

impl ShardLayout {
    /// The layout for `npairs` index pairs and `ghost_buckets` ghost buckets;
    /// `None` when they do not fit in `stride` bytes (or on overflow).
    fn of(npairs: u32, ghost_buckets: u32, stride: u64) -> Option<ShardLayout> {
        let index_rel = SHARD_HDR as u64;
        let ghost_rel = index_rel.checked_add((npairs as u64).checked_mul(2 * 64)?)?;
        let ghost_bytes = (ghost_buckets as u64).checked_mul(4 * GHOST_CELLS as u64)?;
        let small_rel = align(ghost_rel.checked_add(ghost_bytes)?, 64)?;
        let arena = stride.checked_sub(small_rel)?;
        let small_cap = (arena / 10) / 8 * 8;
        let main_cap = (arena - small_cap) / 8 * 8;
        Some(ShardLayout {
            index_rel,
            ghost_rel,
            small_rel,
            small_cap,
            main_cap,
            main_rel: small_rel + small_cap,
        })
    }
}

/// Bytes a record needs besides its value, at most: word0, expiry, tags and
/// the longest key, rounded up generously.
const RECORD_OVERHEAD: u64 = MAX_KEY as u64 + 256;

impl Geometry {
    /// Lays out a segment of `size` bytes for entries of about `avg_item` bytes.
    ///
    /// Costs per expected entry: `avg_item` bytes of log, 1.6 index slots
    /// (12.8 B: pairs of 8-slot buckets stay below ~65% load, so in-place index
    /// evictions are rare), 4 B of ghost fingerprint, 4 B of stamp.
    ///
    /// A record lives in one shard's ring, so one shard's main ring bounds the
    /// largest value. Without an explicit shard count, the count starts at one
    /// shard per 8 MiB (at most 64) and is halved until a value of an eighth of
    /// the segment fits (so 4 shards from 32 MiB up to 16 GiB); larger
    /// segments keep enough shards for every ring to stay below 4 GiB.
    pub fn compute(size: u64, avg_item: u64, shards: Option<u32>) -> Result<Geometry> {
        if !(MIN_SIZE..=MAX_SIZE).contains(&size) {
            return Err(Error::invalid(
                Arg::Size,
                Problem::Range {
                    min: MIN_SIZE.into(),
                    max: MAX_SIZE.into(),
                    got: size.into(),
                },
            ));
        }
        check_avg_item(avg_item.into())?;
        let size = size / 4096 * 4096;
        if let Some(n) = shards {
            if n == 0 || n > 256 || !n.is_power_of_two() {
                return Err(Error::invalid(
                    Arg::Shards,
                    Problem::PowerOfTwo {
                        max: 256,
                        got: n.into(),
                    },
                ));
            }
            return Self::with_shards(size, avg_item, n);
        }
        let want = size / 8;
        let mut n = largest_pow2_le(size / (8 << 20)).clamp(1, 64) as u32;
        let mut best = Self::with_shards(size, avg_item, n)?;
        while best.max_value < want.min(u32::MAX as u64) as u32 && n > 1 {
            n /= 2;
            match Self::with_shards(size, avg_item, n) {
                Ok(g) => best = g,
                // Rings of 4 GiB and more: keep the last layout that fits.
                Err(_) => break,
            }
        }
        Ok(best)
    }

    /// Lays out a segment of `size` bytes (a multiple of 4096) in `nshards` shards.
    fn with_shards(size: u64, avg_item: u64, nshards: u32) -> Result<Geometry> {
        let est_entries = (size / avg_item).max(1024);
        let nstamps =
            (est_entries.min(u32::MAX as u64 / 2) / nshards as u64 * nshards as u64) as u32;
        // One u32 per cell; two tags sharing a cell over-invalidate each other, so
        // keep cells plentiful (~0.8% of the budget).
        let ntags = largest_pow2_le(size / 512).clamp(4096, 1 << 20) as u32;
        let Some((stamps_off, tags_off, shards_off)) = tables(nstamps, ntags) else {
            return Err(Error::invalid(
                Arg::Size,
                Problem::Layout(Layout::TooLarge { size }),
            ));
        };
        if shards_off + nshards as u64 * (SHARD_HDR as u64 + 64 * 1024) > size {
            return Err(Error::invalid(
                Arg::Size,
                Problem::Layout(Layout::TooSmallForShards {
                    size,
                    shards: nshards,
                }),
            ));
        }
        let stride = (size - shards_off) / nshards as u64 / 4096 * 4096;
        let body = stride - SHARD_HDR as u64;
        let per_entry = avg_item as f64 + 12.8 + 4.0;
        let entries = ((body as f64 / per_entry) as u64).max(16);
        let npairs = entries.div_ceil(10).clamp(1, u32::MAX as u64 / 4) as u32;
        let ghost_buckets = (entries * 9 / 10).div_ceil(GHOST_CELLS as u64).max(1) as u32;
        let room = || Error::invalid(Arg::Size, Problem::Layout(Layout::NoRoom { size }));
        let ShardLayout {
            index_rel,
            ghost_rel,
            small_rel,
            small_cap,
            main_cap,
            main_rel,
        } = ShardLayout::of(npairs, ghost_buckets, stride).ok_or_else(room)?;
        if small_rel + MIN_ARENA > stride {
            return Err(room());
        }
        if main_cap > u32::MAX as u64 - 7 {
            return Err(Error::invalid(
                Arg::Shards,
                Problem::Layout(Layout::ShardsTooLarge {
                    shards: nshards,
                    stride,
                }),
            ));
        }
        // A quarter of the main ring, so one value evicts at most that much of
        // its shard; more where needed for an eighth of the segment; never more
        // than 7/8 of the ring, so a write of the largest value still leaves
        // room for the shard's hottest entries.
        let record = (main_cap / 4)
            .max(size / 8 + RECORD_OVERHEAD)
            .min(main_cap / 8 * 7);
        let max_value = record.saturating_sub(RECORD_OVERHEAD) as u32;
        Ok(Geometry {
            file_size: shards_off + stride * nshards as u64,
            nshards,
            npairs,
            nstamps,
            ntags,
            small_cap,
            main_cap,
            ghost_buckets,
            max_key: MAX_KEY as u32,
            max_value,
            stamps_off,
            tags_off,
            shards_off,
            shard_stride: stride,
            index_rel,
            ghost_rel,
            small_rel,
            main_rel,
        })
    }

    /// Start of shard `s`.
    #[inline]
    pub fn shard_off(&self, s: u32) -> usize {
        (self.shards_off + s as u64 * self.shard_stride) as usize
    }

    /// Checks, on attach, that a header describes exactly the layout
    /// [`Geometry::compute`] makes from its counts: every table and region
    /// where the placement rule puts it, aligned, in order and inside the
    /// file. A header that checksums but lies (the checksum is no secret) is
    /// refused as damaged, so no offset derived from it can leave the file.
    /// All arithmetic on the header's values is checked.
    pub fn check(&self, actual_file_size: u64) -> Result<()> {
        let bad = |what: &str| {
            Err(Error::open(
                OpenCause::Damaged,
                format!("header geometry is invalid: {what}"),
            ))
        };
        if self.file_size != actual_file_size
            || self.file_size > MAX_SIZE
            || self.file_size % 4096 != 0
        {
            return bad("file size differs from the header");
        }
        if self.nshards == 0 || !self.nshards.is_power_of_two() || self.nshards > 256 {
            return bad("shard count");
        }
        if self.npairs == 0
            || self.npairs > u32::MAX / 4
            || self.nstamps < self.nshards
            || self.nstamps % self.nshards != 0
            || !self.ntags.is_power_of_two()
            || !(4096..=1 << 20).contains(&self.ntags)
            || self.ghost_buckets == 0
        {
            return bad("table sizes");
        }
        if tables(self.nstamps, self.ntags)
            != Some((self.stamps_off, self.tags_off, self.shards_off))
        {
            return bad("table offsets");
        }
        let end = self
            .shard_stride
            .checked_mul(self.nshards as u64)
            .and_then(|b| b.checked_add(self.shards_off));
        if self.shard_stride == 0 || self.shard_stride % 4096 != 0 || end != Some(self.file_size) {
            return bad("shards do not fill the file");
        }
        let Some(l) = ShardLayout::of(self.npairs, self.ghost_buckets, self.shard_stride) else {
            return bad("shard layout");
        };
        let header = ShardLayout {
            index_rel: self.index_rel,
            ghost_rel: self.ghost_rel,
            small_rel: self.small_rel,
            small_cap: self.small_cap,
            main_cap: self.main_cap,
            main_rel: self.main_rel,
        };
        if header != l
            || l.small_rel + MIN_ARENA > self.shard_stride
            || l.main_cap > u32::MAX as u64 - 7
        {
            return bad("shard layout");
        }
        // `compute` makes the largest value at least a quarter of the main ring
        // (less the record's overhead) and at most seven eighths.
        let least = (self.main_cap / 4).saturating_sub(RECORD_OVERHEAD);
        if self.max_key as usize != MAX_KEY
            || (self.max_value as u64) < least
            || self.max_value as u64 + RECORD_OVERHEAD > self.main_cap / 8 * 7
        {
            return bad("limits");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_fits_the_budget() {
        for size in [1u64 << 20, 4 << 20, 64 << 20, 130 << 20, 1 << 30] {
            let g = Geometry::compute(size, 128, None).unwrap();
            assert!(g.file_size <= size);
            g.check(g.file_size).unwrap();
            assert!(g.max_value > 1000, "{g:?}");
        }
    }

    #[test]
    fn an_eighth_of_the_segment_fits_in_one_value() {
        for size in [
            2u64 << 20,
            16 << 20,
            64 << 20,
            256 << 20,
            1 << 30,
            8 << 30,
            16 << 30,
        ] {
            for avg in [32, 128, 4096] {
                if size > 8 << 30 && avg < 128 {
                    // The stamp table (4 bytes per expected entry) leaves too
                    // little for rings below 4 GiB in 4 shards.
                    continue;
                }
                let g = Geometry::compute(size, avg, None).unwrap();
                g.check(g.file_size).unwrap();
                assert!(
                    g.max_value as u64 >= size / 8,
                    "size {size} avg {avg}: max_value {} with {g:?}",
                    g.max_value
                );
            }
        }
        // Small segments keep one shard per 8 MiB.
        assert_eq!(Geometry::compute(16 << 20, 128, None).unwrap().nshards, 2);
        assert_eq!(Geometry::compute(64 << 20, 128, None).unwrap().nshards, 4);
        // The largest keep rings below 4 GiB, with values an eighth of a shard.
        let g = Geometry::compute(MAX_SIZE, 128, None).unwrap();
        g.check(g.file_size).unwrap();
        assert!(g.main_cap < u32::MAX as u64 && g.nshards >= 32, "{g:?}");
        // An explicit shard count is kept; the largest value follows from it.
        let g = Geometry::compute(64 << 20, 128, Some(8)).unwrap();
        assert_eq!(g.nshards, 8);
        assert!(g.max_value as u64 + RECORD_OVERHEAD <= g.main_cap / 8 * 7);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Geometry::compute(1000, 128, None).is_err());
        assert!(Geometry::compute(64 << 20, 8, None).is_err());
        assert!(Geometry::compute(64 << 20, 128, Some(3)).is_err());
        assert!(Geometry::compute(1 << 20, 128, Some(256)).is_err());
    }

    #[test]
    fn check_rejects_a_lying_header() {
        let mut g = Geometry::compute(64 << 20, 128, None).unwrap();
        g.main_cap += 4096 * 1024;
        assert!(g.check(g.file_size).is_err());
    }
}
