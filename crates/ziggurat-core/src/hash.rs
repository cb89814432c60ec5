//! Seeded XXH3 and the fields derived from one key hash.
//!
//! The seed is random per segment and stored in its header, so every process
//! hashes alike while clients cannot aim keys at one bucket.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Maps a 32-bit hash onto `0..n` without a division (Lemire's reduction).
#[inline(always)]
pub fn reduce(x: u32, n: u32) -> u32 {
    ((x as u64 * n as u64) >> 32) as u32
}

/// Everything the engine needs from one key's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash {
    /// Full 64-bit hash.
    pub(crate) h: u64,
    /// Second, independent-looking mix of `h` for the fields that must not
    /// correlate with the bucket choice.
    pub(crate) h2: u64,
}

impl KeyHash {
    /// Hashes `key` with the segment's seed.
    #[inline]
    pub fn new(seed: u64, key: &[u8]) -> Self {
        let h = xxh3_64_with_seed(key, seed);
        let h2 = (h ^ (h >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let h2 = h2 ^ (h2 >> 32);
        KeyHash { h, h2 }
    }

    /// Shard number in `0..nshards`.
    #[inline]
    pub fn shard(&self, nshards: u32) -> u32 {
        reduce((self.h >> 32) as u32, nshards)
    }

    /// Bucket pair in `0..npairs`.
    #[inline]
    pub fn pair(&self, npairs: u32) -> u32 {
        reduce(self.h as u32, npairs)
    }

    /// 16-bit fingerprint stored in the index slot.
    #[inline]
    pub fn fingerprint(&self) -> u16 {
        (self.h2 >> 48) as u16
    }

    /// Index into the stamp table. Each shard owns an equal slice of the table,
    /// so only that shard's lock holder ever changes a stamp (repair after a
    /// crash then knows an odd stamp in its slice was left by the dead writer).
    #[inline]
    pub fn stamp(&self, nstamps: u32, nshards: u32) -> u32 {
        let per = nstamps / nshards;
        self.shard(nshards) * per + reduce((self.h2 >> 16) as u32, per)
    }

    /// Ghost fingerprint: 24 bits, top bit set (so a ghost cell holding one is never 0).
    #[inline]
    pub fn ghost(&self) -> u32 {
        ((self.h2 as u32) >> 8) | 0x80_0000
    }

    /// Ghost bucket in `0..nbuckets`.
    #[inline]
    pub fn ghost_bucket(&self, nbuckets: u32) -> u32 {
        reduce((self.h2 >> 32) as u32 ^ (self.h as u32), nbuckets)
    }
}

/// Hash of a tag name, salted apart from key hashes.
#[inline]
pub fn tag_hash(seed: u64, tag: &[u8]) -> u64 {
    xxh3_64_with_seed(tag, seed ^ 0x7461_6773_7461_6773)
}

/// Checksum of the immutable header fields.
#[inline]
pub fn checksum(bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, 0x5a49_4747_5552_4154)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_stays_in_range() {
        for n in [1u32, 2, 3, 1000, u32::MAX] {
            for x in [0u32, 1, 12345, u32::MAX] {
                assert!(reduce(x, n) < n);
            }
        }
    }

    #[test]
    fn seed_changes_hash_and_is_stable() {
        let a = KeyHash::new(1, b"key");
        let b = KeyHash::new(2, b"key");
        assert_ne!(a.h, b.h);
        assert_eq!(a, KeyHash::new(1, b"key"));
        assert_eq!(a.ghost() >> 23, 1);
        assert!(a.ghost() < 1 << 24);
    }
}
