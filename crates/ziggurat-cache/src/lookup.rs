//! The read of a key below a front end's L1: the main segment's entry (fresh,
//! or stale past its soft deadline), else the key's cached miss. It returns
//! bytes and words, never a language object, so that every front end answers
//! a read by the same rules: what counts as a cached miss, when a value is
//! stale, when an L1 may keep what was read, and what a load that follows a
//! miss starts from.

use std::sync::atomic::{fence, Ordering};

use ziggurat_core::{now_ms, KeyHash, Segment};

use crate::cache::Cache;
use crate::entry::{Kind, Trailer, TRAILER_LEN};
use crate::flight::{snapshot, Claim, FlightKey};
use crate::front::{Found, Front, Missing, Payload, Read};
use crate::watch::{tag_watches, L1Watch, Watch32};

/// What was read of the key before its probe; turns a fresh value that the
/// front end cannot decode into a miss ([`Reader::missing`]).
pub struct Before {
    kh: KeyHash,
    /// The key's main stamp and the epoch, read before the probe by readers
    /// with an L1 (see [`Reader::lookup`]).
    words: Option<(u32, u64)>,
    /// The key's hashes and its stamp in the cached-miss segment, as the
    /// lease's claim read them, when the read follows one.
    claimed: Option<(FlightKey, u32)>,
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

    /// Reads `key` (checked by the caller). After the lease's claim
    /// ([`crate::Flight::claim`]), `claim` is what it read: the key's hashes
    /// (and their lines loading) and stamps, which the read uses rather than
    /// hash and load them again. A value past its soft deadline is
    /// returned as [`Lookup::Stale`] only if `allow_stale`; otherwise it is a
    /// miss, and so is an entry not written by a cache.
    pub fn lookup<M: Payload>(
        &self,
        key: &[u8],
        claim: Option<&Claim>,
        allow_stale: bool,
        make: &mut M,
    ) -> Lookup<M::Out> {
        let main = self.main;
        let kh = match claim {
            Some(c) => c.keys.main,
            None => {
                let kh = main.hash(key);
                main.prefetch_read(&kh);
                kh
            }
        };
        // Read before the probe: what an L1 entry and a later lease holder compare
        // (a claim read the stamp already, before the probe too).
        // A reader without L1 keeps nothing that watches them, so a fresh value
        // (what most of its reads find) needs neither, and it saves loading a
        // line of the stamp table: it reads the key's stamp only after a probe
        // that found no fresh value, and the load that may follow checks the
        // key again instead of comparing stamps (its snapshot is none).
        let words = self.l1.then(|| {
            let s1 = claim.map_or_else(|| main.stamp_word(&kh).load(), |c| c.main_stamp);
            (s1, main.epoch().load())
        });
        let before = Before {
            kh,
            words,
            claimed: claim.map(|c| (c.keys, c.neg_stamp)),
        };
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
        let (nkh, n1) = match claim {
            Some(c) => (Some(c.keys.neg), c.neg_stamp),
            None => self.neg_stamp(&before, key),
        };
        // Read after the main probe when not before it: a cached miss still
        // counts only under its stamp, as a write that ended since the probe
        // moved it (and one in progress left it odd).
        let s1 = match (words, claim) {
            (Some((s1, _)), _) => s1,
            (None, Some(c)) => c.main_stamp,
            (None, None) => main.stamp_word(&kh).load(),
        };
        let missing = Missing {
            stamps: words.and_then(|_| snapshot(s1, n1)),
            keys: match claim {
                Some(c) => Some(c.keys),
                None => nkh.map(|n| FlightKey::from_hashes(kh, n)),
            },
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
        match (self.neg, before.claimed) {
            (Some(_), Some((keys, stamp))) => (Some(keys.neg), stamp),
            (Some(n), None) => {
                let nkh = n.hash(key);
                n.prefetch_read(&nkh);
                (Some(nkh), n.stamp_word(&nkh).load())
            }
            (None, _) => (None, 0),
        }
    }
}

impl Cache {
    /// Reads `key` (checked) below L1: the main segment, then the cached
    /// misses, decoded and kept in L1 by `front`, counted here. `claim`: what
    /// the lease's claim read of the key, when the read follows one.
    pub fn read<F: Front>(
        &self,
        key: &[u8],
        claim: Option<&Claim>,
        allow_stale: bool,
        front: &mut F,
    ) -> Result<Read<F::Value>, F::Error> {
        let Some(main) = self.main().map(|m| &**m) else {
            return Ok(Read::Miss(Default::default()));
        };
        let c = self.counts();
        let reader = Reader::new(main, self.neg().map(|n| &**n), self.has_l1());
        match reader.lookup(key, claim, allow_stale, front) {
            Lookup::Fresh(found, before) => {
                let t = found.trailer;
                match front.fresh(found)? {
                    Some(v) => {
                        c.l2_hits.bump();
                        Ok(Read::Fresh(v, t))
                    }
                    None => {
                        c.l2_misses.bump();
                        Ok(Read::Miss(reader.missing(&before, key)))
                    }
                }
            }
            Lookup::Stale(found, missing) => {
                let t = found.trailer;
                match front.stale(found) {
                    Some(v) => {
                        c.l2_stale.bump();
                        Ok(Read::Stale(v, t, missing))
                    }
                    None => {
                        c.l2_misses.bump();
                        Ok(Read::Miss(missing))
                    }
                }
            }
            Lookup::Negative(found) => {
                c.l2_misses.bump();
                c.neg_hits.bump();
                let t = found.trailer;
                front.negative(found);
                Ok(Read::Negative(t))
            }
            Lookup::Miss(missing) => {
                c.l2_misses.bump();
                Ok(Read::Miss(missing))
            }
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
