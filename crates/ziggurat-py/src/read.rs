//! Reads below L1: a cache entry from the main segment (fresh, stale past its
//! soft deadline, or a miss), then the cached misses, filling this process's
//! L1 only when the key's stamp and the epoch held across the read.

use std::sync::atomic::{fence, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ziggurat_cache::{FlightKey, Kind, Trailer, TRAILER_LEN};
use ziggurat_core::{now_ms, KeyHash, Segment, TagRef};

use crate::args::{check_key, key_hash, named};
use crate::convert::key_bytes;
use crate::core::{CacheCore, CopyMode};
use crate::l1::{Entry, Watch32, Watch64};

/// What a read below L1 found (also the kinds of `lookup`).
pub const MISS: u8 = 0;

pub const HIT: u8 = 1;

pub const NEG: u8 = 2;

pub const STALE: u8 = 3;

pub(crate) struct Read {
    payload: Py<PyBytes>,
    kind: Kind,
    soft: u64,
    ttl_ms: u32,
    tags: Vec<Watch32>,
}

impl Read {
    /// An L1 entry for what this read found: `value` (None: a cached miss, the
    /// caller's default), valid while the words in `watch` keep the values seen
    /// before the read. Takes the read's tags.
    fn entry(
        &mut self,
        key: &Bound<'_, PyAny>,
        hash: u64,
        value: Option<Py<PyAny>>,
        encoded: Option<Py<PyAny>>,
        watch: (Watch32, Watch64),
    ) -> Entry {
        let negative = value.is_none();
        Entry::new(
            key.clone().unbind(),
            hash,
            value.unwrap_or_else(|| key.py().None()),
            encoded,
            negative,
            Some(watch.0),
            Some(watch.1),
            std::mem::take(&mut self.tags).into_boxed_slice(),
            self.soft,
            self.ttl_ms,
        )
    }
}

/// What a read below L1 found. `stamps` packs the key's stamps in the main and
/// cached-miss segments, as read before a probe that found no fresh value: a
/// later lease holder compares them instead of probing again. `keys`: the key
/// as hashed for both segments, when the read found no fresh value (the lease
/// and the write that follow take these instead of hashing the key again).
pub(crate) struct Below {
    pub kind: u8,
    pub value: Option<Py<PyAny>>,
    pub soft: u64,
    pub ttl_ms: u32,
    pub stamps: Option<u64>,
    pub keys: Option<FlightKey>,
}

impl Below {
    pub(crate) fn miss(main_stamp: u32, neg_stamp: u32, keys: Option<FlightKey>) -> Below {
        Below {
            kind: MISS,
            value: None,
            soft: 0,
            ttl_ms: 0,
            stamps: Below::snap(main_stamp, neg_stamp),
            keys,
        }
    }

    /// Both stamps, if both were even (no write in progress).
    pub(crate) fn snap(main_stamp: u32, neg_stamp: u32) -> Option<u64> {
        ziggurat_cache::snapshot(main_stamp, neg_stamp)
    }
}

pub(crate) fn tag_watches(seg: &Segment, tags: &[u64], n: u8) -> Vec<Watch32> {
    tags[..n as usize]
        .iter()
        .map(|&t| {
            let r = TagRef::unpack(t);
            Watch32::of(seg.tag_watch(r.cell), r.version)
        })
        .collect()
}

/// Stored values up to this many bytes (payload and trailer) are copied out
/// through a stack buffer.
const SMALL_VALUE: usize = 256;

/// Reads a cache entry (payload + trailer) from `seg`; `kh` is `seg.hash(key)`.
pub(crate) fn read_entry(
    py: Python<'_>,
    seg: &Segment,
    kh: &KeyHash,
    key: &[u8],
) -> PyResult<Option<Read>> {
    let got = seg.read_hashed(kh, key, |len, copy| {
        if len < TRAILER_LEN {
            return None; // not written by a cache: a miss
        }
        let n = len - TRAILER_LEN;
        let mut tr = [0u8; TRAILER_LEN];
        let payload = if len <= SMALL_VALUE {
            // One copy of payload and trailer to the stack, then one into a
            // new bytes object: no zeroed buffer, one racy read.
            let mut all = [0u8; SMALL_VALUE];
            copy(0, &mut all[..len]);
            tr.copy_from_slice(&all[n..len]);
            PyBytes::new(py, &all[..n])
        } else {
            // The payload straight into its bytes object.
            copy(n, &mut tr);
            match PyBytes::new_with(py, n, |buf| {
                copy(0, buf);
                Ok(())
            }) {
                Ok(b) => b,
                Err(e) => return Some(Err(e)),
            }
        };
        // Not written by a cache (or torn, if the record moved: a rare miss).
        let t = Trailer::parse(&tr)?;
        Some(Ok((payload, t)))
    });
    let Some((made, meta)) = got else {
        return Ok(None);
    };
    let (payload, t) = made?;
    Ok(Some(Read {
        payload: payload.unbind(),
        kind: t.kind,
        soft: t.soft,
        ttl_ms: t.ttl_ms,
        tags: tag_watches(seg, &meta.tags, meta.ntags),
    }))
}

impl CacheCore {
    fn decode(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kind: Kind,
        payload: &Py<PyBytes>,
    ) -> Option<Py<PyAny>> {
        if kind == Kind::Counter {
            let b: [u8; 8] = payload.bind(py).as_bytes().try_into().ok()?;
            return Some(
                i64::from_le_bytes(b)
                    .into_pyobject(py)
                    .ok()?
                    .into_any()
                    .unbind(),
            );
        }
        match self.loads(py, payload.bind(py).as_any()) {
            Ok(v) => Some(v),
            Err(e) => {
                // A value this process cannot decode (renamed class, other
                // serializer) is a miss, not a failure of the request: counted,
                // and reported to the cache, which logs it once per key.
                self.decode_errors.bump();
                self.write_failed(py, "decode", key, e);
                None
            }
        }
    }

    /// The full read path below L1.
    pub(crate) fn read_below(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        allow_stale: bool,
    ) -> PyResult<Below> {
        self.read_below_with(py, key, hash, allow_stale, None)
    }

    /// `read_below`, for a key already hashed for both segments (`keys`).
    pub(crate) fn read_below_with(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        allow_stale: bool,
        keys: Option<FlightKey>,
    ) -> PyResult<Below> {
        let Some(main) = self.main.as_ref() else {
            return Ok(Below::miss(0, 0, None));
        };
        let kb = key_bytes(key)?; // checked by the callers
        let kh = keys.map_or_else(|| main.hash(kb), |k| *k.main());
        main.prefetch_read(&kh);
        let stamp = main.stamp_word(&kh);
        let s1 = stamp.load(Ordering::Acquire);
        // The key in the cached-miss segment (hashed once, only when no fresh
        // value is found): its hash, and its stamp there, read before that
        // segment is probed (a loader's None bumps it).
        let neg_of = || -> (Option<KeyHash>, u32) {
            match self.neg.as_ref() {
                Some(n) => {
                    let nkh = keys.map_or_else(|| n.hash(kb), |k| *k.neg());
                    n.prefetch_read(&nkh);
                    (Some(nkh), n.stamp_word(&nkh).load(Ordering::Acquire))
                }
                None => (None, 0),
            }
        };
        let both = |nkh: Option<KeyHash>| nkh.map(|n| FlightKey::from_hashes(kh, n));
        let epoch = main.epoch();
        let e1 = epoch.load(Ordering::Acquire);
        // What an L1 entry made from this read validates against.
        let watch = || {
            (
                Watch32::of(main.stamp_watch(&kh), s1),
                Watch64::of(main.epoch_watch(), e1),
            )
        };
        let now = now_ms();
        if let Some(mut r) = read_entry(py, main, &kh, kb)? {
            if r.kind == Kind::Value || r.kind == Kind::Counter {
                let stale = r.soft != 0 && now >= r.soft;
                if stale && !allow_stale {
                    self.l2_misses.bump();
                    let (nkh, n1) = neg_of();
                    return Ok(Below::miss(s1, n1, both(nkh)));
                }
                let Some(obj) = self.decode(py, key, r.kind, &r.payload) else {
                    self.l2_misses.bump();
                    let (nkh, n1) = neg_of();
                    return Ok(Below::miss(s1, n1, both(nkh)));
                };
                if stale {
                    self.l2_stale.bump();
                    let (nkh, n1) = neg_of();
                    return Ok(Below {
                        kind: STALE,
                        value: Some(obj),
                        soft: r.soft,
                        ttl_ms: r.ttl_ms,
                        stamps: Below::snap(s1, n1),
                        keys: both(nkh),
                    });
                }
                self.l2_hits.bump();
                fence(Ordering::Acquire);
                let s2 = stamp.load(Ordering::Acquire);
                let e2 = epoch.load(Ordering::Acquire);
                if s1 == s2 && s1 & 1 == 0 && e1 == e2 && self.l1_enabled {
                    let counter = r.kind == Kind::Counter;
                    let (stored, encoded) = match self.mode {
                        CopyMode::Decode if !counter => (r.payload.clone_ref(py).into_any(), None),
                        _ => (
                            obj.clone_ref(py),
                            (self.debug && !counter).then(|| r.payload.clone_ref(py).into_any()),
                        ),
                    };
                    self.l1_put(key, r.entry(key, hash, Some(stored), encoded, watch()));
                }
                let out = match self.mode {
                    // `obj` is already a private decode: hand it out as is.
                    CopyMode::Decode => obj,
                    _ => self.out(py, &obj)?,
                };
                return Ok(Below {
                    kind: HIT,
                    value: Some(out),
                    soft: r.soft,
                    ttl_ms: r.ttl_ms,
                    stamps: None,
                    keys: None,
                });
            }
        }
        self.l2_misses.bump();
        let (nkh, n1) = neg_of();
        // A cached miss counts only while the key's main stamp is unchanged.
        if let (Some(neg), Some(nkh)) = (self.neg.as_ref(), nkh.as_ref()) {
            // Most caches store few cached misses, or none: a shard of that
            // segment with no entry at all is not probed (read after the key's
            // stamp there, `n1`, as `shard_empty` asks).
            if s1 & 1 != 0 {
                // A write of the key is in progress: no cached miss counts.
            } else if neg.shard_empty(nkh) {
                neg.count(false);
            } else if let Some(mut r) = read_entry(py, neg, nkh, kb)? {
                let pb = r.payload.bind(py).as_bytes();
                let fresh = r.soft == 0 || now < r.soft;
                if r.kind == Kind::Negative
                    && fresh
                    && pb.len() == 4
                    && u32::from_le_bytes(pb.try_into().unwrap()) == s1
                {
                    self.neg_hits.bump();
                    let e2 = epoch.load(Ordering::Acquire);
                    if e1 == e2 && stamp.load(Ordering::Acquire) == s1 {
                        self.l1_put(key, r.entry(key, hash, None, None, watch()));
                    }
                    return Ok(Below {
                        kind: NEG,
                        value: None,
                        soft: r.soft,
                        ttl_ms: r.ttl_ms,
                        stamps: None,
                        keys: None,
                    });
                }
            }
        }
        Ok(Below::miss(s1, n1, both(nkh)))
    }

    /// L1, then L2: the value or cached miss of `key` if one is there now.
    pub(crate) fn find_now(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
    ) -> PyResult<Option<Py<PyAny>>> {
        if let Some(e) = self.l1_hit(py, key, hash) {
            if e.negative {
                return Ok(Some(py.None()));
            }
            return Ok(Some(self.out(py, &e.value)?));
        }
        let b = self.read_below(py, key, hash, false)?;
        Ok(match b.kind {
            HIT => b.value,
            NEG => Some(py.None()),
            _ => None,
        })
    }

    /// The fresh value of `key` below L1 (None for a miss or a cached miss).
    pub(crate) fn read_value(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
    ) -> PyResult<Option<Py<PyAny>>> {
        let b = self.read_below(py, key, hash, false)?;
        Ok(if b.kind == HIT { b.value } else { None })
    }
}

/// What `peek` found (named fields, see `CacheCore::peek`).
#[pyclass(module = "ziggurat._native", frozen, get_all)]
pub struct Peek {
    /// `ziggurat.loader.Found`: 0 miss, 1 hit, 2 cached miss, 3 stale.
    found: u8,
    /// The value (None unless hit or stale).
    value: Py<PyAny>,
    /// Seconds before the entry goes stale; negative: stale for that long.
    seconds_left: f64,
    /// The TTL the entry was written with, in seconds (0: never expires).
    ttl: f64,
}

#[pymethods]
impl CacheCore {
    /// What this process would find for `key` now, without loading: the
    /// kind (`ziggurat.loader.Found`), the value, the seconds left before it
    /// goes stale (negative: stale for that long) and its TTL. Fills L1 like
    /// a read does.
    fn peek(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Peek> {
        named(
            py,
            "Cache.peek",
            (|| {
                let hash = key_hash(key)?;
                let now = now_ms();
                let left = |soft: u64| {
                    if soft == 0 {
                        f64::INFINITY
                    } else {
                        soft.saturating_sub(now) as f64 / 1000.0
                    }
                };
                let tuple = |kind: u8, v: Py<PyAny>, left: f64, ttl: u32, _: Option<u64>| {
                    Ok(Peek {
                        found: kind,
                        value: v,
                        seconds_left: left,
                        ttl: ttl as f64 / 1000.0,
                    })
                };
                if let Some(e) = self.l1_hit(py, key, hash) {
                    let (soft, ttl) = (e.deadline, e.ttl_ms);
                    if e.negative {
                        return tuple(NEG, py.None(), left(soft), ttl, None);
                    }
                    if self.debug {
                        self.check_mutation(py, key, &e)?;
                    }
                    let v = self.out(py, &e.value)?;
                    return tuple(HIT, v, left(soft), ttl, None);
                }
                check_key(key)?;
                self.l1_misses.bump();
                let b = self.read_below(py, key, hash, true)?;
                let left = if b.kind == STALE {
                    -((now.saturating_sub(b.soft)) as f64 / 1000.0)
                } else {
                    left(b.soft)
                };
                let v = b.value.unwrap_or_else(|| py.None());
                tuple(b.kind, v, left, b.ttl_ms, b.stamps)
            })(),
        )
    }
}
