//! The hash index: per shard, pairs of 64-byte buckets of eight u64 slot words.
//!
//! A key lives in one of the 16 slots of its pair. A slot word is published
//! with one atomic store (or CAS), so a reader sees the old record or the new
//! one, never a mix. A full pair evicts its coldest slot in place: no resize,
//! no overflow chain, bounded work for attacker-chosen keys.
//!
//! Slot word (u64), 0 = empty:
//! `valid:1 | fingerprint:16 | freq:2 | ring:1 | offset/8:44`

use crate::layout::RingId;

pub const VALID: u64 = 1 << 63;
const FP_SHIFT: u32 = 47;
const FREQ_SHIFT: u32 = 45;
const RING_BIT: u64 = 1 << 44;
const OFF_MASK: u64 = (1 << 44) - 1;
/// Adds one to a slot's frequency.
pub const FREQ_ONE: u64 = 1 << FREQ_SHIFT;
const FREQ_MASK: u64 = 3 << FREQ_SHIFT;
/// Highest frequency value (2 bits).
pub const FREQ_MAX: u8 = 3;
/// Slots per bucket pair.
pub const PAIR_SLOTS: usize = 16;

/// Builds a slot word.
#[inline]
pub fn pack(fp: u16, freq: u8, ring: RingId, phys: u64) -> u64 {
    debug_assert!(phys % 8 == 0 && phys / 8 <= OFF_MASK && freq <= FREQ_MAX);
    let ring_bit = if ring == RingId::Main { RING_BIT } else { 0 };
    VALID | ((fp as u64) << FP_SHIFT) | ((freq as u64) << FREQ_SHIFT) | ring_bit | (phys / 8)
}

/// Fingerprint of a slot word.
#[inline]
pub fn fp(w: u64) -> u16 {
    (w >> FP_SHIFT) as u16
}

/// Frequency of a slot word.
#[inline]
pub fn freq(w: u64) -> u8 {
    ((w & FREQ_MASK) >> FREQ_SHIFT) as u8
}

/// Ring of a slot word.
#[inline]
pub fn ring(w: u64) -> RingId {
    if w & RING_BIT != 0 {
        RingId::Main
    } else {
        RingId::Small
    }
}

/// Byte offset of the record inside its ring.
#[inline]
pub fn phys(w: u64) -> u64 {
    (w & OFF_MASK) * 8
}

/// The same word with another frequency.
#[cfg(test)]
pub fn with_freq(w: u64, f: u8) -> u64 {
    (w & !FREQ_MASK) | (f as u64) << FREQ_SHIFT
}

/// Whether two words point at the same record (frequency aside).
#[inline]
pub fn same_target(a: u64, b: u64) -> bool {
    (a ^ b) & !FREQ_MASK == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack() {
        let w = pack(0xBEEF, 2, RingId::Main, 8 * 12345);
        assert_ne!(w, 0);
        assert_eq!(fp(w), 0xBEEF);
        assert_eq!(freq(w), 2);
        assert_eq!(ring(w), RingId::Main);
        assert_eq!(phys(w), 8 * 12345);
        let w2 = with_freq(w, 3);
        assert!(same_target(w, w2));
        assert_eq!(freq(w2), 3);
        assert_eq!(freq(w + FREQ_ONE), 3);
        let s = pack(0, 0, RingId::Small, 0);
        assert_eq!(ring(s), RingId::Small);
        assert_ne!(s, 0, "a valid slot is never the empty word");
    }
}
