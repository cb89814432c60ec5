//! The read of a key below a front end's L1: the main segment's entry (fresh,
//! or stale past its soft deadline), else the key's cached miss. It returns
//! bytes and words, never a language object, so that every front end answers
//! a read by the same rules: what counts as a cached miss, when a value is
//! stale, when an L1 may keep what was read, and what a load that follows a
//! miss starts from.

use std::sync::atomic::{fence, Ordering};

use ziggurat_core::{now_ms, KeyHash, Segment};

use crate::entry::{Kind, Trailer, TRAILER_LEN};
use crate::flight::{snapshot, FlightKey};
use crate::watch::{tag_watches, L1Watch, Watch32};

/// Makes a front end's payload (a bytes object, a buffer) from a stored value.
/// A read that has to start again drops what it made, so either call may run
/// more than once per read.
pub trait Payload {
    /// What the front end keeps of a payload.
    type Out;
    /// A payload holding a copy of `bytes`.
    fn copied(&mut self, bytes: &[u8]) -> Self::Out;
    /// A payload of `len` bytes that `write` writes (call it once, on a buffer
    /// of exactly `len` bytes).
    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Self::Out;
}

/// The payload as a vector: for front ends and tests that want plain bytes.
pub struct Bytes;

impl Payload for Bytes {
    type Out = Vec<u8>;

    fn copied(&mut self, bytes: &[u8]) -> Vec<u8> {
        bytes.to_vec()
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Vec<u8> {
        let mut v = vec![0u8; len];
        write(&mut v);
        v
    }
}

/// A value or a cached miss found below L1.
pub struct Found<P> {
    /// The payload (the cache's encoding of the value; for a counter, its
    /// little-endian `i64`).
    pub payload: P,
    /// The entry's kind and deadlines.
    pub trailer: Trailer,
    /// The entry's tags, as an L1 entry of it watches them (empty for
    /// readers made without an L1, which keep nothing that could watch).
    pub tags: Vec<Watch32>,
    /// Set when an L1 may keep what was read (only asked for by readers made
    /// with an L1, see [`Reader::new`]).
    pub keep: Option<L1Watch>,
}

/// Where a load of a key that was not found fresh starts from: both stamps as
/// read before the probes ([`snapshot`]), so that a lease holder can tell
/// whether anything was written since instead of probing again, and the key's
/// hashes in both segments, so that the lease and the write that follow do
/// not hash it again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Missing {
    /// Both stamps, None while either was odd (a write in progress), and
    /// always for a reader without L1, which reads them after its probe.
    pub stamps: Option<u64>,
    /// The key hashed for both segments (None without a cached-miss segment).
    pub keys: Option<FlightKey>,
}

/// What was read of the key before its probe; turns a fresh value that the
/// front end cannot decode into a miss ([`Reader::missing`]).
pub struct Before {
    kh: KeyHash,
    /// The key's main stamp and the epoch, read before the probe by readers
    /// with an L1 (see [`Reader::lookup`]).
    words: Option<(u32, u64)>,
    keys: Option<FlightKey>,
}

/// What a read below L1 found.
pub enum Lookup<P> {
    /// A value or counter before its soft deadline. A front end that cannot
    /// decode it treats it as a miss: [`Reader::missing`].
    Fresh(Found<P>, Before),
    /// A value past its soft deadline, returned only when the caller allows
    /// stale values; the load that refreshes it starts from the [`Missing`].
    Stale(Found<P>, Missing),
    /// A cached miss stored after the key's last write (no payload).
    Negative(Found<()>),
    /// Nothing usable: no entry, a stale one the caller did not allow, or a
    /// record not written by a cache.
    Miss(Missing),
}

/// Stored values up to this many bytes (payload and trailer) are copied out
/// in one piece through a stack buffer: one racy read instead of two.
const SMALL_VALUE: usize = 256;

/// The segments of one cache as a read below L1 sees them.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    main: &'a Segment,
    neg: Option<&'a Segment>,
    l1: bool,
}

impl<'a> Reader<'a> {
    /// Reads of the cache made of `main` and its cached-miss segment `neg`
    /// (None: misses are not cached). `l1`: whether the front end keeps what
    /// it reads in an L1, and so needs [`Found::keep`] (and the stamps read
    /// before the probe that an L1 entry and [`Missing::stamps`] are made of).
    pub fn new(main: &'a Segment, neg: Option<&'a Segment>, l1: bool) -> Reader<'a> {
        Reader { main, neg, l1 }
    }

    /// Reads `key` (checked by the caller), hashed as `keys` when a caller
    /// already did (else hashed here). A value past its soft deadline is
    /// returned as [`Lookup::Stale`] only if `allow_stale`; otherwise it is a
    /// miss, and so is an entry not written by a cache.
    pub fn lookup<M: Payload>(
        &self,
        key: &[u8],
        keys: Option<FlightKey>,
        allow_stale: bool,
        make: &mut M,
    ) -> Lookup<M::Out> {
        let main = self.main;
        let kh = keys.map_or_else(|| main.hash(key), |k| *k.main());
        main.prefetch_read(&kh);
        // Read before the probe: what an L1 entry and a later lease holder compare.
        // A reader without L1 keeps nothing that watches them, so a fresh value
        // (what most of its reads find) needs neither, and it saves loading a
        // line of the stamp table: it reads the key's stamp only after a probe
        // that found no fresh value, and the load that may follow checks the
        // key again instead of comparing stamps (its snapshot is none).
        let words = self.l1.then(|| {
            let s1 = main.stamp_word(&kh).load();
            (s1, main.epoch().load())
        });
        let before = Before { kh, words, keys };
        // One clock read decides both the engine's expiry and the staleness.
        let now = now_ms();
        if let Some((payload, trailer, tags)) = entry(main, &kh, key, now, self.l1, make) {
            if trailer.kind == Kind::Value || trailer.kind == Kind::Counter {
                if trailer.stale_at(now) {
                    let missing = self.missing(&before, key);
                    if !allow_stale {
                        return Lookup::Miss(missing);
                    }
                    let found = Found {
                        payload,
                        trailer,
                        tags,
                        keep: None,
                    };
                    return Lookup::Stale(found, missing);
                }
                let found = Found {
                    payload,
                    trailer,
                    tags,
                    keep: self.keep(&kh, words),
                };
                return Lookup::Fresh(found, before);
            }
        }
        let (nkh, n1) = self.neg_stamp(&before, key);
        // Read after the main probe when not before it: a cached miss still
        // counts only under its stamp, as a write that ended since the probe
        // moved it (and one in progress left it odd).
        let s1 = match words {
            Some((s1, _)) => s1,
            None => main.stamp_word(&kh).load(),
        };
        let missing = Missing {
            stamps: words.and_then(|_| snapshot(s1, n1)),
            keys: nkh.map(|n| FlightKey::from_hashes(kh, n)),
        };
        let (Some(neg), Some(nkh)) = (self.neg, nkh) else {
            return Lookup::Miss(missing);
        };
        // A cached miss counts only while the key's main stamp is the one it
        // was stored under, and never while a write of the key is in progress.
        if s1 & 1 != 0 {
            return Lookup::Miss(missing);
        }
        // Most caches store few cached misses, or none: a shard of that
        // segment with no entry at all is not probed (read after the key's
        // stamp there, as `shard_empty` asks).
        if neg.shard_empty(&nkh) {
            neg.count(false);
            return Lookup::Miss(missing);
        }
        if let Some((of, trailer, tags)) = entry(neg, &nkh, key, now, self.l1, &mut StampPayload) {
            if trailer.kind == Kind::Negative && of == Some(s1) && !trailer.stale_at(now) {
                return Lookup::Negative(Found {
                    payload: (),
                    trailer,
                    tags,
                    keep: self.keep(&kh, words),
                });
            }
        }
        Lookup::Miss(missing)
    }

    /// The words an L1 entry of what was just read watches: the key's stamp
    /// and the epoch as loaded before the probe (`words`, which only readers
    /// with an L1 load). None without them, or when an L1 copy could not be
    /// told from a newer value: a write was in progress (odd stamp) or one of
    /// the words moved during the read.
    fn keep(&self, kh: &KeyHash, words: Option<(u32, u64)>) -> Option<L1Watch> {
        let (stamp, epoch) = words?;
        if stamp & 1 != 0 {
            return None;
        }
        fence(Ordering::Acquire);
        let main = self.main;
        let held = main.stamp_word(kh).load() == stamp && main.epoch().load() == epoch;
        held.then(|| L1Watch::of(main, kh, stamp, epoch))
    }

    /// The miss that a fresh value becomes when the front end cannot use it
    /// (it does not decode): where a load of `key` starts from.
    pub fn missing(&self, before: &Before, key: &[u8]) -> Missing {
        let (nkh, n1) = self.neg_stamp(before, key);
        Missing {
            stamps: before.words.and_then(|(s1, _)| snapshot(s1, n1)),
            keys: nkh.map(|n| FlightKey::from_hashes(before.kh, n)),
        }
    }

    /// The key's hash in the cached-miss segment and its stamp there, read
    /// before that segment is probed (a cached miss's store moves it).
    fn neg_stamp(&self, before: &Before, key: &[u8]) -> (Option<KeyHash>, u32) {
        match self.neg {
            Some(n) => {
                let nkh = before.keys.map_or_else(|| n.hash(key), |k| *k.neg());
                n.prefetch_read(&nkh);
                (Some(nkh), n.stamp_word(&nkh).load())
            }
            None => (None, 0),
        }
    }
}

/// A cached miss's payload: the main stamp it was stored under.
struct StampPayload;

impl Payload for StampPayload {
    type Out = Option<u32>;

    fn copied(&mut self, bytes: &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }

    fn written(&mut self, _: usize, _: &dyn Fn(&mut [u8])) -> Option<u32> {
        None // longer than a stamp: not a cached miss
    }
}

/// Reads the entry (payload and trailer) of `key` in `seg` at time `now`,
/// and the watches of its tags if `tags`; `kh` is `seg.hash(key)`. None for
/// no record, or one a cache did not write (too short, or torn if the record
/// moved: a rare miss).
fn entry<M: Payload>(
    seg: &Segment,
    kh: &KeyHash,
    key: &[u8],
    now: u64,
    tags: bool,
    make: &mut M,
) -> Option<(M::Out, Trailer, Vec<Watch32>)> {
    let ((payload, trailer), meta) = seg.read_hashed(kh, key, now, |len, copy| {
        let n = len.checked_sub(TRAILER_LEN)?;
        let mut tr = [0u8; TRAILER_LEN];
        let payload = if len <= SMALL_VALUE {
            let mut all = [0u8; SMALL_VALUE];
            copy(0, &mut all[..len]);
            tr.copy_from_slice(&all[n..len]);
            make.copied(&all[..n])
        } else {
            copy(n, &mut tr);
            make.written(n, &|buf| copy(0, buf))
        };
        Some((payload, Trailer::parse(&tr)?))
    })?;
    let watches = if tags {
        tag_watches(seg, &meta.tags[..meta.ntags as usize])
    } else {
        Vec::new()
    };
    Some((payload, trailer, watches))
}
