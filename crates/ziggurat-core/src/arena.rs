//! The log arena: per shard, two ring buffers of self-describing records.
//!
//! A write appends a record past the ring's head and then moves the head;
//! eviction moves the tail. Space is reused only after the tail has passed it
//! and every slot pointing into it was cleared or moved, so a crash at any
//! instruction leaves, at worst, an unreachable record. Positions are logical
//! (they only grow); the physical offset is `logical % cap`.
//!
//! Record (8-byte aligned):
//! ```text
//! word0: val_len:32 | key_len:16 | ntags:4 | flags:4 | check:8
//! [expiry_ms: u64]          if flags & HAS_EXPIRY
//! [tag: u64] * ntags        cell:32 | version:32
//! key bytes, value bytes, zero padding to 8
//! ```
//! A PAD record (flags & PAD) fills the end of the ring when the next record
//! does not fit; its val_len is its whole length.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::shm::Shm;

/// Highest logical position a ring's head may hold (2^62 bytes: over a decade
/// of writes to one shard at 10 GB/s). Below it, no sum of a position, a ring's capacity
/// and a record's length can wrap.
pub const MAX_POS: u64 = 1 << 62;

pub const HAS_EXPIRY: u8 = 1;
pub const PAD: u8 = 2;
const CHECK_SALT: u8 = 0xA5;

/// A parsed record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub val_len: u32,
    pub key_len: u16,
    pub ntags: u8,
    pub flags: u8,
}

#[inline]
fn check_byte(val_len: u32, key_len: u16, ntags: u8, flags: u8) -> u8 {
    let v = val_len.to_le_bytes();
    CHECK_SALT
        ^ v[0]
        ^ v[1].rotate_left(1)
        ^ v[2].rotate_left(2)
        ^ v[3].rotate_left(3)
        ^ (key_len as u8).rotate_left(4)
        ^ ((key_len >> 8) as u8).rotate_left(5)
        ^ (ntags << 4 | flags)
}

impl Header {
    /// Encodes word0.
    #[inline]
    pub fn encode(&self) -> u64 {
        self.val_len as u64
            | (self.key_len as u64) << 32
            | ((self.ntags & 15) as u64) << 48
            | ((self.flags & 15) as u64) << 52
            | (check_byte(self.val_len, self.key_len, self.ntags, self.flags) as u64) << 56
    }

    /// Decodes word0; `None` when the check byte or the fields are off.
    #[inline]
    pub fn decode(w: u64) -> Option<Header> {
        let h = Header {
            val_len: w as u32,
            key_len: (w >> 32) as u16,
            ntags: ((w >> 48) & 15) as u8,
            flags: ((w >> 52) & 15) as u8,
        };
        if (w >> 56) as u8 != check_byte(h.val_len, h.key_len, h.ntags, h.flags)
            || h.flags & !(HAS_EXPIRY | PAD) != 0
            || h.ntags as usize > crate::layout::MAX_TAGS
        {
            return None;
        }
        if h.flags & PAD != 0 && (h.key_len != 0 || h.ntags != 0 || h.val_len % 8 != 0) {
            return None;
        }
        Some(h)
    }

    /// A PAD record of `len` bytes.
    pub fn pad(len: u64) -> Header {
        Header {
            val_len: len as u32,
            key_len: 0,
            ntags: 0,
            flags: PAD,
        }
    }

    /// Whether this is a PAD record.
    #[inline]
    pub fn is_pad(&self) -> bool {
        self.flags & PAD != 0
    }

    /// Bytes before the key: word0, expiry, tags.
    #[inline]
    pub fn meta_len(&self) -> usize {
        8 + if self.flags & HAS_EXPIRY != 0 { 8 } else { 0 } + 8 * self.ntags as usize
    }

    /// Whole record length, padded to 8.
    #[inline]
    pub fn total_len(&self) -> u64 {
        if self.is_pad() {
            return self.val_len as u64;
        }
        record_len(
            self.meta_len(),
            self.key_len as usize,
            self.val_len as usize,
        )
    }
}

/// Length of a record with `meta` header bytes, padded to 8.
#[inline]
pub fn record_len(meta: usize, key: usize, val: usize) -> u64 {
    ((meta + key + val + 7) & !7) as u64
}

/// One ring of a shard: where its head and tail words and its bytes are.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    pub head_off: usize,
    pub tail_off: usize,
    pub data: usize,
    pub cap: u64,
}

impl Ring {
    #[inline]
    pub fn head<'a>(&self, shm: &'a Shm) -> &'a AtomicU64 {
        shm.u64_at(self.head_off)
    }

    #[inline]
    pub fn tail<'a>(&self, shm: &'a Shm) -> &'a AtomicU64 {
        shm.u64_at(self.tail_off)
    }

    /// The ring's head and tail, if they describe a ring: whole words, the
    /// tail not past the head, at most `cap` bytes apart, and the head at most
    /// [`MAX_POS`]. Anything else is damage (the words are in the file), and
    /// a writer that went on with it could wrap a position or never free
    /// space; it resets the shard instead.
    #[inline]
    pub fn ends(&self, shm: &Shm) -> Option<(u64, u64)> {
        let head = self.head(shm).load(Ordering::Acquire);
        let tail = self.tail(shm).load(Ordering::Acquire);
        (tail <= head && head - tail <= self.cap && head <= MAX_POS && (head | tail) % 8 == 0)
            .then_some((head, tail))
    }

    /// Free bytes (writers only: they hold the lock, so head and tail are
    /// stable); none when the positions are damaged (see [`Ring::ends`]).
    #[inline]
    pub fn free(&self, shm: &Shm) -> u64 {
        self.ends(shm)
            .map_or(0, |(head, tail)| self.cap - (head - tail))
    }

    /// The logical position of a record at physical `phys`, assuming it is live
    /// (within the last `cap` bytes before `head`). `None` if `head` is too
    /// small, or `phys` is not inside the ring (a damaged slot word).
    #[inline]
    pub fn logical(&self, head: u64, phys: u64) -> Option<u64> {
        if phys >= self.cap {
            return None;
        }
        let hp = head % self.cap;
        // hp and phys are below cap (at most 4 GiB), so the sum cannot wrap and
        // the distance needs no second division (a 64-bit one costs tens of
        // cycles on a read's path).
        let mut dist = hp + self.cap - phys;
        if dist > self.cap {
            dist -= self.cap;
        }
        head.checked_sub(dist)
    }

    /// Absolute file offset of physical ring offset `phys`.
    #[inline]
    pub fn at(&self, phys: u64) -> usize {
        self.data + phys as usize
    }

    /// Reads and decodes the header at `phys` (racy; callers re-validate).
    /// Also returns the expiry (0 = none). Bounds-checked against the ring.
    #[inline]
    pub fn header(&self, shm: &Shm, phys: u64) -> Option<(Header, u64)> {
        if phys % 8 != 0 || phys.checked_add(8).is_none_or(|end| end > self.cap) {
            return None;
        }
        let h = Header::decode(shm.u64_at(self.at(phys)).load(Ordering::Relaxed))?;
        let len = h.total_len();
        if len == 0 || phys.checked_add(len).is_none_or(|end| end > self.cap) {
            return None;
        }
        let exp = if h.flags & HAS_EXPIRY != 0 {
            shm.u64_at(self.at(phys) + 8).load(Ordering::Relaxed)
        } else {
            0
        };
        Some((h, exp))
    }

    /// The `i`-th tag of the record at `phys` whose header is `h`.
    #[inline]
    pub fn tag(&self, shm: &Shm, phys: u64, h: &Header, i: usize) -> u64 {
        let off = self.at(phys) + h.meta_len() - 8 * (h.ntags as usize - i);
        shm.u64_at(off).load(Ordering::Relaxed)
    }

    /// Whether the key stored at `phys` equals `key` (racy read). The key
    /// starts on a word (word0, the expiry and the tags are whole words).
    #[inline]
    pub fn key_eq(&self, shm: &Shm, phys: u64, h: &Header, key: &[u8]) -> bool {
        h.key_len as usize == key.len() && shm.eq_racy(self.at(phys) + h.meta_len(), key)
    }

    /// Copies the key of the record at `phys` (writers, under lock).
    pub fn key(&self, shm: &Shm, phys: u64, h: &Header) -> Vec<u8> {
        let mut k = vec![0u8; h.key_len as usize];
        shm.read_racy(self.at(phys) + h.meta_len(), &mut k);
        k
    }

    /// Writes a record at `phys` (writer, under lock, into free space).
    #[allow(clippy::too_many_arguments)]
    pub fn write_record(
        &self,
        shm: &Shm,
        phys: u64,
        h: &Header,
        expiry: u64,
        tags: &[u64],
        key: &[u8],
        val: &[u8],
    ) {
        let base = self.at(phys);
        shm.u64_at(base).store(h.encode(), Ordering::Relaxed);
        let mut off = base + 8;
        if h.flags & HAS_EXPIRY != 0 {
            shm.u64_at(off).store(expiry, Ordering::Relaxed);
            off += 8;
        }
        for t in tags {
            shm.u64_at(off).store(*t, Ordering::Relaxed);
            off += 8;
        }
        shm.write(off, key);
        shm.write(off + key.len(), val);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_check() {
        let h = Header {
            val_len: 90,
            key_len: 8,
            ntags: 2,
            flags: HAS_EXPIRY,
        };
        let w = h.encode();
        assert_eq!(Header::decode(w), Some(h));
        assert_eq!(h.meta_len(), 8 + 8 + 16);
        assert_eq!(h.total_len(), 136);
        // Every single flipped bit in word0 is caught by the check byte.
        for bit in 0..64 {
            assert_eq!(Header::decode(w ^ (1 << bit)), None, "bit {bit}");
        }
        let p = Header::pad(4096);
        assert_eq!(Header::decode(p.encode()), Some(p));
        assert_eq!(p.total_len(), 4096);
        assert_eq!(Header::decode(0), None);
    }

    #[test]
    fn logical_positions() {
        let r = Ring {
            head_off: 0,
            tail_off: 8,
            data: 0,
            cap: 1000,
        };
        assert_eq!(r.logical(2500, 400), Some(2400));
        assert_eq!(r.logical(2500, 600), Some(1600));
        assert_eq!(r.logical(2500, 500), Some(1500));
        assert_eq!(r.logical(100, 400), None);
    }
}
