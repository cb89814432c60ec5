//! `CacheCore`: the native half of `ziggurat.Cache`. It owns the L1 and reads
//! and writes the L2 segments, so that a `get` that hits L1 is one call into
//! the extension. Loader coordination, serializer choice and the friendly API
//! live in the Python package.
//!
//! L2 value layout for the cache: `payload || kind:u8 || soft_deadline:u64 || ttl_ms:u32`
//! (little-endian). The segment entry itself lives `stale_ttl` longer than the
//! soft deadline, so a fail-safe read can still find a stale value. A cached
//! miss lives in a second, smaller segment (its own byte budget) with payload
//! `main_stamp:u32`: it only counts while the key's stamp in the main segment
//! still has that value, so any later set or delete of the key voids it.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySet, PyTuple};
use ziggurat_core::now_ms;
use ziggurat_core::Lease;
use ziggurat_core::Segment;
use ziggurat_core::TagRef;

use crate::codec::AutoCodec;
use crate::convert::{err, key_bytes, tags_arg, ttl_arg, ZigguratError};
use crate::l1::{Entry, Shared, Watch32, Watch64, L1};
use crate::segment::PySegment;

create_exception!(
    _native,
    MutationError,
    ZigguratError,
    "A cached object was changed by its caller (raised in debug mode)."
);

const TRAILER: usize = 13;
const KIND_VALUE: u8 = 1;
const KIND_NEG: u8 = 2;
const READ_TRIES: usize = 4;

/// Statuses of `lease`.
pub const LEASE_FOUND: u8 = 1;
pub const LEASE_HELD: u8 = 4;
pub const LEASE_WAIT: u8 = 5;

/// How `get` hands out cached objects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CopyMode {
    Shared,
    Copy,
    Decode,
}

/// Result kinds of `lookup`.
pub const MISS: u8 = 0;
pub const HIT: u8 = 1;
pub const NEG: u8 = 2;
pub const STALE: u8 = 3;

struct Read {
    payload: Py<PyBytes>,
    kind: u8,
    soft: u64,
    ttl_ms: u32,
    tags: Vec<Watch32>,
}

/// What a read below L1 found. `stamps` packs the key's stamps in the main and
/// cached-miss segments, as read before a probe that found no fresh value: a
/// later lease holder compares them instead of probing again.
struct Below {
    kind: u8,
    value: Option<Py<PyAny>>,
    soft: u64,
    ttl_ms: u32,
    stamps: Option<u64>,
}

impl Below {
    fn miss(main_stamp: u32, neg_stamp: u32) -> Below {
        Below {
            kind: MISS,
            value: None,
            soft: 0,
            ttl_ms: 0,
            stamps: Below::snap(main_stamp, neg_stamp),
        }
    }

    /// Both stamps, if both were even (no write in progress).
    fn snap(main_stamp: u32, neg_stamp: u32) -> Option<u64> {
        (main_stamp & 1 == 0 && neg_stamp & 1 == 0)
            .then_some(main_stamp as u64 | (neg_stamp as u64) << 32)
    }
}

/// A counter bumped with the GIL held (a plain load and store suffice).
#[derive(Default)]
struct Counter(AtomicU64);

impl Counter {
    #[inline]
    fn bump(&self) -> u64 {
        let n = self.0.load(Ordering::Relaxed) + 1;
        self.0.store(n, Ordering::Relaxed);
        n
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// (ttl, neg_ttl, stale_ttl, jitter, loader_timeout) as passed from Python.
type FetchDefaults = (f64, Option<f64>, Option<f64>, f64, f64);

/// The cache-wide defaults the native `fetch` path stores loads with.
struct FetchConfig {
    ttl: f64,
    neg_ttl: Option<f64>,
    stale_ttl: Option<f64>,
    jitter: f64,
    loader_timeout: f64,
}

/// Loader calls, errors and latency (bumped with the GIL held).
#[derive(Default)]
struct LoadCounts {
    calls: Counter,
    errors: Counter,
    total_ns: Counter,
    max_ns: AtomicU64,
}

impl LoadCounts {
    fn record(&self, ns: u64, ok: bool) {
        self.calls.bump();
        if !ok {
            self.errors.bump();
        }
        self.total_ns.0.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    fn counts(&self) -> (u64, u64, u64, u64) {
        (
            self.calls.get(),
            self.errors.get(),
            self.total_ns.get(),
            self.max_ns.load(Ordering::Relaxed),
        )
    }
}

/// What `CacheCore::take_lease` found: a value stored meanwhile, the lease
/// (with the key's main stamp before the load), or another holder.
enum Leased {
    Found(Py<PyAny>),
    Held(u32),
    Busy { holder: u64, seq: u32 },
}

/// What `CacheCore::l1_shared` found.
enum Quick {
    Miss,
    Negative,
    Value(Py<PyAny>),
}

/// An L1 hit, copied out of the table so no lock is held while Python runs.
struct L1Hit {
    negative: bool,
    value: Py<PyAny>,
    encoded: Option<Py<PyAny>>,
    deadline: u64,
    ttl_ms: u32,
}

// Frozen: every method takes `&self`, so threads of one process never meet a
// "borrowed" error; the L1 is behind a try-lock (see `l1::Shared`).
#[pyclass(module = "ziggurat._native", frozen)]
pub struct CacheCore {
    main: Option<Arc<Segment>>,
    neg: Option<Arc<Segment>>,
    l1: Shared,
    l1_enabled: bool,
    loads: Py<PyAny>,
    dumps: Py<PyAny>,
    /// Set when the serializer is the native "auto" codec: called without Python.
    codec: Option<Py<AutoCodec>>,
    mode: CopyMode,
    debug: bool,
    /// `fetch`'s slow path (a Python callable): misses and early refreshes.
    miss: Option<Py<PyAny>>,
    /// Fraction of the TTL at its end in which a `fetch` hit takes the slow path.
    refresh_ahead: f64,
    /// The cache's defaults for `fetch`; None keeps every miss on the slow path.
    fetch_cfg: Option<FetchConfig>,
    /// Called as `(what, key, exception)` when a write made for `fetch` fails.
    on_write_error: Option<Py<PyAny>>,
    loads_done: LoadCounts,
    rng: AtomicU64,
    l1_misses: Counter,
    l2_hits: Counter,
    l2_misses: Counter,
    l2_stale: Counter,
    neg_hits: Counter,
    decode_errors: Counter,
}

fn tag_watches(seg: &Segment, tags: &[u64], n: u8) -> Vec<Watch32> {
    tags[..n as usize]
        .iter()
        .map(|&t| {
            let r = TagRef::unpack(t);
            Watch32 {
                word: seg.tag_word(r.cell) as *const _,
                seen: r.version,
            }
        })
        .collect()
}

/// Reads a cache entry (payload + trailer) from `seg`.
fn read_entry(py: Python<'_>, seg: &Segment, key: &[u8]) -> PyResult<Option<Read>> {
    let kh = seg.hash(key);
    for _ in 0..READ_TRIES {
        match seg.probe(&kh, key) {
            None => break,
            Some(Err(())) => continue,
            Some(Ok(f)) => {
                if f.val_len < TRAILER {
                    break; // not written by a cache: ignore
                }
                let n = f.val_len - TRAILER;
                let payload = PyBytes::new_with(py, n, |buf| {
                    let mut all = f;
                    all.val_len = n;
                    seg.copy_value(&all, buf);
                    Ok(())
                })?;
                let mut tr = [0u8; TRAILER];
                let mut tail = f;
                tail.val_off += n;
                tail.val_len = TRAILER;
                seg.copy_value(&tail, &mut tr);
                if seg.confirm(&kh, &f) {
                    return Ok(Some(Read {
                        payload: payload.unbind(),
                        kind: tr[0],
                        soft: u64::from_le_bytes(tr[1..9].try_into().unwrap()),
                        ttl_ms: u32::from_le_bytes(tr[9..13].try_into().unwrap()),
                        tags: tag_watches(seg, &f.tags, f.ntags),
                    }));
                }
            }
        }
    }
    seg.count(false);
    Ok(None)
}

/// Refuses keys no tier could store (checked on L1 misses, so the hit path stays short).
fn check_key<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    let kb = key_bytes(key)?;
    if kb.is_empty() || kb.len() > ziggurat_core::MAX_KEY {
        return Err(PyValueError::new_err(format!(
            "key must be 1 to {} bytes, got {}",
            ziggurat_core::MAX_KEY,
            kb.len()
        )));
    }
    Ok(kb)
}

fn trailer(kind: u8, soft: u64, ttl_ms: u32) -> [u8; TRAILER] {
    let mut t = [0u8; TRAILER];
    t[0] = kind;
    t[1..9].copy_from_slice(&soft.to_le_bytes());
    t[9..13].copy_from_slice(&ttl_ms.to_le_bytes());
    t
}

fn positive_ttl(ttl: f64, what: &str) -> PyResult<f64> {
    if ttl.is_finite() && ttl > 0.0 && ttl <= 100.0 * 365.0 * 86400.0 {
        Ok(ttl)
    } else {
        Err(PyValueError::new_err(format!(
            "{what} must be a finite number of seconds > 0, got {ttl}"
        )))
    }
}

impl CacheCore {
    /// Hands out a cached object according to the copy mode.
    #[inline]
    fn out(&self, py: Python<'_>, v: &Py<PyAny>) -> PyResult<Py<PyAny>> {
        match self.mode {
            CopyMode::Shared => Ok(v.clone_ref(py)),
            CopyMode::Copy => {
                let b = v.bind(py);
                if let Ok(d) = b.cast_exact::<PyDict>() {
                    Ok(d.copy()?.into_any().unbind())
                } else if b.is_exact_instance_of::<PyList>() || b.is_exact_instance_of::<PySet>() {
                    Ok(b.call_method0("copy")?.unbind())
                } else {
                    Ok(v.clone_ref(py))
                }
            }
            CopyMode::Decode => self.loads(py, v.bind(py)),
        }
    }

    /// The value's bytes, by the native codec when the serializer is "auto".
    #[inline]
    fn dumps<'py>(&self, py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match &self.codec {
            Some(c) => Ok(c.get().encode(py, v)?.into_any()),
            None => Ok(self.dumps.call1(py, (v,))?.into_bound(py)),
        }
    }

    /// The object encoded in `data`, by the native codec when the serializer is "auto".
    #[inline]
    fn loads(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match &self.codec {
            Some(c) => c.get().decode(py, data),
            None => self.loads.call1(py, (data,)),
        }
    }

    fn check_mutation(&self, py: Python<'_>, key: &Bound<'_, PyAny>, e: &L1Hit) -> PyResult<()> {
        if let Some(enc) = &e.encoded {
            let now = self.dumps(py, e.value.bind(py))?;
            if !now.eq(enc.bind(py))? {
                return Err(MutationError::new_err(format!(
                    "the cached object for key {} was mutated after it was returned; \
                     copy it before changing it, or use copy='copy' or copy='decode'",
                    key.repr()?
                )));
            }
        }
        Ok(())
    }

    /// L1 probe: `take` reads the key's entry if it is valid (a stale one is
    /// dropped); None on a miss, or when another thread of this process is
    /// inside the L1 at this instant. `take` runs inside the guard: it must not
    /// run Python code.
    #[inline(always)]
    fn l1_probe<R>(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        take: impl FnOnce(&Entry) -> R,
    ) -> Option<R> {
        if !self.l1_enabled {
            return None;
        }
        self.l1
            .try_with(py, |l1| {
                let i = l1.find(key, hash)?;
                let e = l1.entry(i);
                if !e.valid(now_ms()) {
                    l1.remove(i);
                    l1.stats.stale += 1;
                    return None;
                }
                let out = take(e);
                l1.mark(i);
                l1.stats.hits += 1;
                Some(out)
            })
            .flatten()
    }

    /// A valid entry's contents, copied out so no guard is held while Python runs.
    #[inline(always)]
    fn l1_hit(&self, py: Python<'_>, key: &Bound<'_, PyAny>, hash: u64) -> Option<L1Hit> {
        self.l1_probe(py, key, hash, |e| L1Hit {
            negative: e.negative,
            value: e.value.clone_ref(py),
            encoded: e.encoded.as_ref().map(|x| x.clone_ref(py)),
            deadline: e.deadline,
            ttl_ms: e.ttl_ms,
        })
    }

    /// The probe of `get` and `fetch` when the object is handed out as is
    /// (shared mode, no debug): only what those need, small enough to come back
    /// in registers, because this is the hot path of the whole cache.
    #[inline(always)]
    fn l1_shared(&self, py: Python<'_>, key: &Bound<'_, PyAny>, hash: u64) -> Quick {
        self.l1_probe(py, key, hash, |e| {
            if e.negative {
                Quick::Negative
            } else {
                Quick::Value(e.value.clone_ref(py))
            }
        })
        .unwrap_or(Quick::Miss)
    }

    /// Puts an entry in L1 unless another thread is inside it right now.
    #[inline]
    fn l1_put(&self, key: &Bound<'_, PyAny>, e: Entry) {
        if self.l1_enabled {
            // A busy L1 just skips the fill; the entry is dropped after the call.
            let _ = self.l1.try_with(key.py(), |l1| l1.insert(key, e));
        }
    }

    fn decode(&self, py: Python<'_>, payload: &Py<PyBytes>) -> Option<Py<PyAny>> {
        match self.loads(py, payload.bind(py).as_any()) {
            Ok(v) => Some(v),
            Err(e) => {
                // A value this process cannot decode (renamed class, other
                // serializer) is a miss, not a failure of the request.
                if self.decode_errors.bump() <= 3 {
                    e.print(py);
                }
                None
            }
        }
    }

    /// The full read path below L1.
    fn read_below(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        allow_stale: bool,
    ) -> PyResult<Below> {
        let Some(main) = self.main.as_ref() else {
            return Ok(Below::miss(0, 0));
        };
        let kb = key_bytes(key)?; // checked by the callers
        let kh = main.hash(kb);
        main.prefetch_read(&kh);
        let stamp = main.stamp_word(&kh);
        let s1 = stamp.load(Ordering::Acquire);
        // The key's stamp in the cached-miss segment, read before that segment
        // is probed (a loader's None bumps it); only misses need it.
        let neg_now = || self.neg_stamp(kb).map_or(0, |w| w.load(Ordering::Acquire));
        let epoch = main.epoch();
        let e1 = epoch.load(Ordering::Acquire);
        let now = now_ms();
        if let Some(r) = read_entry(py, main, kb)? {
            if r.kind == KIND_VALUE {
                let stale = r.soft != 0 && now >= r.soft;
                if stale && !allow_stale {
                    self.l2_misses.bump();
                    return Ok(Below::miss(s1, neg_now()));
                }
                let Some(obj) = self.decode(py, &r.payload) else {
                    self.l2_misses.bump();
                    return Ok(Below::miss(s1, neg_now()));
                };
                if stale {
                    self.l2_stale.bump();
                    return Ok(Below {
                        kind: STALE,
                        value: Some(obj),
                        soft: r.soft,
                        ttl_ms: r.ttl_ms,
                        stamps: Below::snap(s1, neg_now()),
                    });
                }
                self.l2_hits.bump();
                fence(Ordering::Acquire);
                let s2 = stamp.load(Ordering::Acquire);
                let e2 = epoch.load(Ordering::Acquire);
                if s1 == s2 && s1 & 1 == 0 && e1 == e2 && self.l1_enabled {
                    let (stored, encoded) = match self.mode {
                        CopyMode::Decode => (r.payload.clone_ref(py).into_any(), None),
                        _ => (
                            obj.clone_ref(py),
                            self.debug.then(|| r.payload.clone_ref(py).into_any()),
                        ),
                    };
                    let e = Entry::new(
                        key.clone().unbind(),
                        hash,
                        stored,
                        encoded,
                        false,
                        Some(Watch32::of(stamp, s1)),
                        Some(Watch64::of(epoch, e1)),
                        r.tags.into_boxed_slice(),
                        r.soft,
                        r.ttl_ms,
                    );
                    self.l1_put(key, e);
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
                });
            }
        }
        self.l2_misses.bump();
        let n1 = neg_now();
        // A cached miss counts only while the key's main stamp is unchanged.
        if let Some(neg) = self.neg.as_ref() {
            if s1 & 1 == 0 {
                if let Some(r) = read_entry(py, neg, kb)? {
                    let pb = r.payload.bind(py).as_bytes();
                    let fresh = r.soft == 0 || now < r.soft;
                    if r.kind == KIND_NEG
                        && fresh
                        && pb.len() == 4
                        && u32::from_le_bytes(pb.try_into().unwrap()) == s1
                    {
                        self.neg_hits.bump();
                        let e2 = epoch.load(Ordering::Acquire);
                        if e1 == e2 && stamp.load(Ordering::Acquire) == s1 {
                            let e = Entry::new(
                                key.clone().unbind(),
                                hash,
                                py.None(),
                                None,
                                true,
                                Some(Watch32::of(stamp, s1)),
                                Some(Watch64::of(epoch, e1)),
                                r.tags.into_boxed_slice(),
                                r.soft,
                                r.ttl_ms,
                            );
                            self.l1_put(key, e);
                        }
                        return Ok(Below {
                            kind: NEG,
                            value: None,
                            soft: r.soft,
                            ttl_ms: r.ttl_ms,
                            stamps: None,
                        });
                    }
                }
            }
        }
        Ok(Below::miss(s1, n1))
    }

    /// The stamp word of `kb` in the cached-miss segment.
    fn neg_stamp(&self, kb: &[u8]) -> Option<&std::sync::atomic::AtomicU32> {
        self.neg.as_ref().map(|n| n.stamp_word(&n.hash(kb)))
    }

    /// Whether no write of the key (value or cached miss) has landed since `snap`
    /// was taken by a lookup that missed.
    fn unchanged_since(&self, kb: &[u8], snap: u64) -> bool {
        let Some(main) = self.main.as_ref() else {
            return false;
        };
        let s = main.stamp_word(&main.hash(kb)).load(Ordering::Acquire);
        let n = self.neg_stamp(kb).map_or(0, |w| w.load(Ordering::Acquire));
        Below::snap(s, n) == Some(snap)
    }

    /// L1, then L2: the value or cached miss of `key` if one is there now.
    fn find_now(
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

    /// Encodes and writes `value` (arguments already checked), then keeps the
    /// object in this process's L1.
    #[allow(clippy::too_many_arguments)]
    fn store(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        stale: f64,
        tags: &[Vec<u8>],
    ) -> PyResult<()> {
        let kh = self.main.as_ref().map(|m| {
            let kh = m.hash(kb);
            m.prefetch_write(&kh);
            kh
        });
        // Any failure to encode (an unpicklable object) is the caller's bad input.
        let enc = self.dumps(py, value).map_err(|e| {
            let t = PyTypeError::new_err(format!("cannot serialize the value for this cache: {e}"));
            t.set_cause(py, Some(e));
            t
        })?;
        let enc = &enc;
        let payload: &[u8] = match enc.cast::<PyBytes>() {
            Ok(b) => b.as_bytes(),
            Err(_) => {
                return Err(PyTypeError::new_err(
                    "the serializer's dumps must return bytes",
                ))
            }
        };
        let Some(main) = self.main.as_ref() else {
            // Degraded: no segment. Keep a private copy in L1 only: the encoded
            // bytes in decode mode (decoded per get), else a decoded object.
            let obj = match self.mode {
                CopyMode::Decode => enc.clone().unbind(),
                _ => self.loads(py, enc)?,
            };
            let e = Entry::new(
                key.clone().unbind(),
                hash,
                obj,
                None,
                false,
                None,
                None,
                Box::new([]),
                now_ms() + (ttl * 1000.0) as u64,
                (ttl * 1000.0) as u32,
            );
            self.l1_put(key, e);
            return Ok(());
        };
        let ttl_ms = (ttl * 1000.0).ceil().min(u32::MAX as f64) as u32;
        let soft = now_ms() + ttl_ms as u64;
        let mut buf = Vec::with_capacity(payload.len() + TRAILER);
        buf.extend_from_slice(payload);
        buf.extend_from_slice(&trailer(KIND_VALUE, soft, ttl_ms));
        let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
        let kh = kh.unwrap_or_else(|| main.hash(kb));
        let stamp = main.stamp_word(&kh);
        let epoch = main.epoch();
        let s0 = stamp.load(Ordering::Acquire);
        let e0 = epoch.load(Ordering::Acquire);
        let watches = if self.l1_enabled {
            main.tag_refs(&tag_refs).map_err(err)?
        } else {
            Vec::new()
        };
        // No GIL release: the write is a few hundred ns, and a lock wait is
        // bounded by lock_timeout without needing the GIL on the other side.
        main.set_hashed(kb, &kh, &buf, Some(ttl + stale), &tag_refs)
            .map_err(err)?;
        // Keep the object in this process's L1 if no other write of the key (or
        // of a key sharing its stamp) landed between the two stamp reads.
        let s1 = stamp.load(Ordering::Acquire);
        if self.l1_enabled
            && s0 & 1 == 0
            && s1 == s0.wrapping_add(2)
            && epoch.load(Ordering::Acquire) == e0
        {
            let n = watches.len() as u8;
            let mut arr = [0u64; ziggurat_core::MAX_TAGS];
            arr[..watches.len()].copy_from_slice(&watches);
            let (stored, encoded) = match self.mode {
                CopyMode::Decode => (PyBytes::new(py, payload).into_any().unbind(), None),
                // "copy" promises callers their own objects: keep a private decode, not
                // the caller's object, which the caller may still change.
                CopyMode::Copy => match self.loads(py, PyBytes::new(py, payload).as_any()) {
                    Ok(obj) => (obj, None),
                    Err(_) => {
                        // The write is done; without a private copy, just forget L1's.
                        let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
                        return Ok(());
                    }
                },
                // "shared" hands out the object that was set, as lru_cache does.
                CopyMode::Shared => (
                    value.clone().unbind(),
                    self.debug
                        .then(|| PyBytes::new(py, payload).into_any().unbind()),
                ),
            };
            // Replaces this process's previous entry for the key, if any.
            let e = Entry::new(
                key.clone().unbind(),
                hash,
                stored,
                encoded,
                false,
                Some(Watch32::of(stamp, s1)),
                Some(Watch64::of(epoch, e0)),
                tag_watches(main, &arr, n).into_boxed_slice(),
                soft,
                ttl_ms,
            );
            self.l1_put(key, e);
        } else {
            // Stale now anyway (its stamp moved); drop it to free the slot.
            let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
        }
        Ok(())
    }

    /// Writes a cached miss of `kb` valid while its main stamp is `stamp`.
    fn store_negative(&self, kb: &[u8], ttl: f64, stamp: u32, tags: &[Vec<u8>]) -> PyResult<()> {
        let Some(neg) = self.neg.as_ref() else {
            return Ok(());
        };
        let ttl_ms = (ttl * 1000.0).ceil().min(u32::MAX as f64) as u32;
        let mut buf = Vec::with_capacity(4 + TRAILER);
        buf.extend_from_slice(&stamp.to_le_bytes());
        buf.extend_from_slice(&trailer(KIND_NEG, now_ms() + ttl_ms as u64, ttl_ms));
        let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
        neg.set(kb, &buf, Some(ttl), &tag_refs).map_err(err)
    }

    /// Reports a failed write to the Python side (logged and counted there).
    fn write_failed(&self, py: Python<'_>, what: &str, key: &Bound<'_, PyAny>, e: PyErr) {
        if let Some(hook) = &self.on_write_error {
            if let Err(e2) = hook.call1(py, (what, key, e.value(py))) {
                e2.print(py);
            }
        }
    }

    /// The miss path of `fetch` when nothing is unusual: no per-call TTLs, no
    /// stale value to fall back on, the lease free. Returns None to hand the
    /// call to the Python slow path (which handles waits, takeovers, fail-safe
    /// and degraded mode) before anything was changed.
    fn fetch_fast(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        loader: &Bound<'_, PyAny>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let (Some(neg), Some(f)) = (self.neg.as_ref(), self.fetch_cfg.as_ref()) else {
            return Ok(None);
        };
        // Tags given as a generator would be consumed here and be gone for
        // the slow path; only tuples and lists are read on this path.
        let plain_tags = tags.is_none_or(|t| {
            t.is_none() || t.is_exact_instance_of::<PyTuple>() || t.is_exact_instance_of::<PyList>()
        });
        // Early refresh and fail-safe need the hit's deadline and the stale value:
        // the slow path reads both.
        if self.refresh_ahead > 0.0 || f.stale_ttl.is_some() || !plain_tags || !loader.is_callable()
        {
            return Ok(None);
        }
        let kb = check_key(key)?;
        let tags = tags_arg(tags)?;
        self.l1_misses.bump();
        let b = self.read_below(py, key, hash, false)?;
        match b.kind {
            HIT => return Ok(b.value),
            NEG => return Ok(Some(py.None())),
            _ => {}
        }
        let Some(stamps) = b.stamps else {
            return Ok(None);
        };
        let stamp = match self.take_lease(py, key, kb, hash, Some(stamps), f.loader_timeout)? {
            Leased::Found(v) => return Ok(Some(v)),
            Leased::Busy { .. } => return Ok(None), // another caller loads it: the slow path waits
            Leased::Held(stamp) => stamp,
        };
        let t0 = std::time::Instant::now();
        let loaded = loader.call0();
        self.loads_done
            .record(t0.elapsed().as_nanos() as u64, loaded.is_ok());
        let stored = match &loaded {
            Err(_) => Ok(()),
            Ok(v) if v.is_none() => match f.neg_ttl {
                Some(nt) => self.store_negative(kb, nt, stamp, &tags),
                None => Ok(()),
            },
            Ok(v) => {
                let ttl = f.ttl * (1.0 - f.jitter * self.jitter_draw());
                self.store(py, key, kb, hash, v, ttl, 0.0, &tags)
            }
        };
        neg.lease_release(kb, std::process::id());
        if let Err(e) = stored {
            // A value that cannot be stored (too large, not serializable, no lock in
            // time) is still returned, just not cached; anything else propagates.
            let expected = e.is_instance_of::<ZigguratError>(py)
                || e.is_instance_of::<PyValueError>(py)
                || e.is_instance_of::<PyTypeError>(py);
            if !expected {
                return Err(e);
            }
            self.write_failed(py, "store", key, e);
        }
        Ok(Some(loaded?.unbind()))
    }

    /// Takes the load lease of `key` for this process. With `stamps` from a
    /// lookup that missed, an unchanged key needs no second probe; otherwise a
    /// value that landed meanwhile is found (and the lease given back).
    fn take_lease(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        stamps: Option<u64>,
        timeout: f64,
    ) -> PyResult<Leased> {
        let (Some(main), Some(neg)) = (self.main.as_ref(), self.neg.as_ref()) else {
            return Err(PyValueError::new_err("no segment: leases need one"));
        };
        let pid = std::process::id();
        match neg.lease_try(kb, pid, timeout) {
            Lease::Taken => {
                if !stamps.is_some_and(|s| self.unchanged_since(kb, s)) {
                    if let Some(v) = self.find_now(py, key, hash)? {
                        neg.lease_release(kb, pid);
                        return Ok(Leased::Found(v));
                    }
                }
                let stamp = main.stamp_word(&main.hash(kb)).load(Ordering::Acquire);
                Ok(Leased::Held(stamp))
            }
            Lease::Held { holder, seq } => Ok(Leased::Busy { holder, seq }),
        }
    }

    /// A number in [0, 1) for TTL jitter (xorshift; races between threads
    /// only mix the state further).
    fn jitter_draw(&self) -> f64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Empties L1; if another thread is inside it, the epoch and stamps still
    /// void its entries, so skipping is safe.
    fn l1_clear(&self, py: Python<'_>) {
        let _ = self.l1.try_with(py, |l1| l1.clear());
    }

    fn main_seg(&self) -> Option<&Arc<Segment>> {
        self.main.as_ref()
    }
}

#[pymethods]
impl CacheCore {
    #[new]
    #[pyo3(signature = (main, neg, l1_items, l1_neg_items, loads, dumps, copy = "shared", debug = false, miss = None, refresh_ahead = 0.0, fetch_defaults = None, on_write_error = None, codec = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        main: Option<&Bound<'_, PySegment>>,
        neg: Option<&Bound<'_, PySegment>>,
        l1_items: usize,
        l1_neg_items: usize,
        loads: Py<PyAny>,
        dumps: Py<PyAny>,
        copy: &str,
        debug: bool,
        miss: Option<Py<PyAny>>,
        refresh_ahead: f64,
        fetch_defaults: Option<FetchDefaults>,
        on_write_error: Option<Py<PyAny>>,
        codec: Option<Py<AutoCodec>>,
    ) -> PyResult<Self> {
        let fetch_cfg =
            fetch_defaults.map(
                |(ttl, neg_ttl, stale_ttl, jitter, loader_timeout)| FetchConfig {
                    ttl,
                    neg_ttl,
                    stale_ttl,
                    jitter,
                    loader_timeout,
                },
            );
        let seed = now_ms() ^ ((std::process::id() as u64) << 32) | 1;
        let mode = match copy {
            "shared" => CopyMode::Shared,
            "copy" => CopyMode::Copy,
            "decode" => CopyMode::Decode,
            other => {
                return Err(PyValueError::new_err(format!(
                    "copy must be 'shared', 'copy' or 'decode', got {other:?}"
                )))
            }
        };
        Ok(CacheCore {
            main: main.map(|m| m.get().inner.clone()),
            neg: neg.map(|m| m.get().inner.clone()),
            l1: Shared::new(L1::new(l1_items, l1_neg_items)),
            l1_enabled: l1_items > 0,
            loads,
            dumps,
            codec,
            mode,
            debug,
            miss,
            refresh_ahead,
            fetch_cfg,
            on_write_error,
            loads_done: LoadCounts::default(),
            rng: AtomicU64::new(seed),
            l1_misses: Counter::default(),
            l2_hits: Counter::default(),
            l2_misses: Counter::default(),
            l2_stale: Counter::default(),
            neg_hits: Counter::default(),
            decode_errors: Counter::default(),
        })
    }

    /// The cached value of `key`, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let hash = key.hash()? as u64;
        if self.mode == CopyMode::Shared && !self.debug {
            match self.l1_shared(py, key, hash) {
                Quick::Value(v) => return Ok(v),
                Quick::Negative => return Ok(default.unwrap_or_else(|| py.None())),
                Quick::Miss => {}
            }
        } else if let Some(e) = self.l1_hit(py, key, hash) {
            if e.negative {
                return Ok(default.unwrap_or_else(|| py.None()));
            }
            if self.debug {
                self.check_mutation(py, key, &e)?;
            }
            return self.out(py, &e.value);
        }
        check_key(key)?;
        self.l1_misses.bump();
        match self.read_below(py, key, hash, false)? {
            Below {
                kind: HIT,
                value: Some(v),
                ..
            } => Ok(v),
            _ => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// `Cache.fetch`: an L1 hit is answered here, with no Python frame; anything
    /// else (a miss, an entry due for early refresh) goes to the slow path.
    #[pyo3(signature = (key, loader, *, ttl = None, tags = None, neg_ttl = None, stale_ttl = None))]
    #[allow(clippy::too_many_arguments)]
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        loader: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        tags: Option<&Bound<'py, PyAny>>,
        neg_ttl: Option<&Bound<'py, PyAny>>,
        stale_ttl: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let hash = key.hash()? as u64;
        // Whether L1 holds an entry that is due for early refresh.
        let due = if self.mode == CopyMode::Shared && !self.debug && self.refresh_ahead == 0.0 {
            match self.l1_shared(py, key, hash) {
                Quick::Value(v) => return Ok(v),
                Quick::Negative => return Ok(py.None()),
                Quick::Miss => false,
            }
        } else if let Some(e) = self.l1_hit(py, key, hash) {
            if e.negative {
                return Ok(py.None());
            }
            let due = self.refresh_ahead > 0.0
                && e.deadline != 0
                && (e.deadline.saturating_sub(now_ms()) as f64)
                    < self.refresh_ahead * e.ttl_ms as f64;
            if !due {
                if self.debug {
                    self.check_mutation(py, key, &e)?;
                }
                return self.out(py, &e.value);
            }
            true
        } else {
            false
        };
        let unset = |a: Option<&Bound<'py, PyAny>>| a.is_none_or(|a| a.is_none());
        if !due && unset(ttl) && unset(neg_ttl) && unset(stale_ttl) {
            if let Some(v) = self.fetch_fast(py, key, hash, loader, tags)? {
                return Ok(v);
            }
        }
        let Some(miss) = self.miss.as_ref() else {
            return Err(PyValueError::new_err(
                "this CacheCore has no fetch slow path",
            ));
        };
        let arg =
            |a: Option<&Bound<'py, PyAny>>| a.cloned().unwrap_or_else(|| py.None().into_bound(py));
        miss.call1(
            py,
            (
                key,
                loader,
                arg(ttl),
                tags.cloned()
                    .unwrap_or_else(|| PyTuple::empty(py).into_any()),
                arg(neg_ttl),
                arg(stale_ttl),
            ),
        )
    }

    // The slow path is usually a bound method of the Cache that owns this core:
    // a cycle, which the garbage collector can only see through this.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.loads)?;
        visit.call(&self.dumps)?;
        if let Some(m) = &self.miss {
            visit.call(m)?;
        }
        if let Some(h) = &self.on_write_error {
            visit.call(h)?;
        }
        Ok(())
    }

    /// (kind, value, seconds_left, ttl_seconds, stamps) with kind 0 miss, 1 hit,
    /// 2 cached miss, 3 stale (past its TTL, within stale_ttl). `stamps` (an int
    /// or None) is for `lease`: it lets the lease holder skip a second probe.
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let hash = key.hash()? as u64;
        let now = now_ms();
        let left = |soft: u64| {
            if soft == 0 {
                f64::INFINITY
            } else {
                soft.saturating_sub(now) as f64 / 1000.0
            }
        };
        let tuple = |kind: u8, v: Py<PyAny>, left: f64, ttl: u32, stamps: Option<u64>| {
            PyTuple::new(
                py,
                [
                    kind.into_pyobject(py)?.into_any(),
                    v.into_bound(py),
                    left.into_pyobject(py)?.into_any(),
                    (ttl as f64 / 1000.0).into_pyobject(py)?.into_any(),
                    stamps.into_pyobject(py)?.into_any(),
                ],
            )
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
    }

    /// Takes the per-host load lease of `key` (single flight), after a lookup
    /// that missed. Returns `(status, value, seen, stamp)`:
    ///
    /// - `(FOUND, value, 0, 0)`: another caller stored the value (or a cached
    ///   miss, value None) meanwhile; no lease is held;
    /// - `(LEASED, None, 0, stamp)`: this process holds the lease and must load,
    ///   then `release`; `stamp` is the key's main stamp before the load, for
    ///   `set_negative`;
    /// - `(WAIT, holder, seq, 0)`: another caller holds it; wait with
    ///   `wait_lease(key, seq, ...)`, or `take_over(key, holder, ...)` when the
    ///   holder's process (`holder & 0xffffffff`) is gone.
    ///
    /// `stamps` is the last element of the missed `lookup`, or None after a
    /// wait; with it, an unchanged key needs no second probe.
    #[pyo3(signature = (key, stamps, timeout))]
    fn lease<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        stamps: Option<u64>,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let kb = check_key(key)?;
        let hash = key.hash()? as u64;
        let found = |v: Py<PyAny>| (LEASE_FOUND, v, 0u32, 0u32).into_pyobject(py);
        if stamps.is_none() {
            // After a wait most callers find the value: no lease taken for them.
            if let Some(v) = self.find_now(py, key, hash)? {
                return found(v);
            }
        }
        match self.take_lease(py, key, kb, hash, stamps, timeout)? {
            Leased::Found(v) => found(v),
            Leased::Held(stamp) => (LEASE_HELD, py.None(), 0u32, stamp).into_pyobject(py),
            Leased::Busy { holder, seq } => {
                if let Some(v) = self.find_now(py, key, hash)? {
                    return found(v);
                }
                (LEASE_WAIT, holder, seq, 0u32).into_pyobject(py)
            }
        }
    }

    /// Takes the lease of `key` from `holder` (as `lease` reported it), whose
    /// process is gone; true for exactly one of the callers that saw it.
    fn take_over(&self, key: &Bound<'_, PyAny>, holder: u64, timeout: f64) -> PyResult<bool> {
        let kb = check_key(key)?;
        Ok(self
            .neg
            .as_ref()
            .is_some_and(|n| n.lease_take_over(kb, holder, std::process::id(), timeout)))
    }

    /// Sleeps (without the GIL) until the lease of `key` is released after
    /// `seen` (the `seq` that `lease` reported) or `timeout` seconds pass;
    /// returns whether it was.
    fn wait_lease(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        seen: u32,
        timeout: f64,
    ) -> PyResult<bool> {
        let kb = check_key(key)?;
        let Some(neg) = self.neg.as_ref() else {
            return Ok(true);
        };
        let t = std::time::Duration::from_secs_f64(timeout.clamp(0.0, 86400.0));
        Ok(py.detach(|| neg.lease_wait(kb, seen, t)))
    }

    /// Gives up this process's lease of `key` (waiters wake and find the value).
    fn release(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let kb = check_key(key)?;
        if let Some(neg) = self.neg.as_ref() {
            neg.lease_release(kb, std::process::id());
        }
        Ok(())
    }

    /// Encodes and stores `value`. `ttl` and `stale_ttl` in seconds.
    #[pyo3(signature = (key, value, ttl, tags = None, stale_ttl = None))]
    fn set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: &Bound<'_, PyAny>,
        tags: Option<&Bound<'_, PyAny>>,
        stale_ttl: Option<f64>,
    ) -> PyResult<()> {
        // Every check comes before any write, so bad input changes nothing.
        let Some(ttl) = ttl_arg(Some(ttl))? else {
            return Err(PyTypeError::new_err("ttl must be a number of seconds"));
        };
        let ttl = positive_ttl(ttl, "ttl")?;
        let stale = match stale_ttl {
            None => 0.0,
            Some(s) => positive_ttl(s, "stale_ttl")?,
        };
        let kb = check_key(key)?;
        let tags = tags_arg(tags)?;
        let hash = key.hash()? as u64;
        self.store(py, key, kb, hash, value, ttl, stale, &tags)
    }

    /// `Cache.set`: `ttl` defaults to the cache's, `stale_ttl` is the cache's.
    /// A failed write (lock timeout, segment error) is reported to the write
    /// error hook (logged and counted) and raised.
    #[pyo3(signature = (key, value, *, ttl = None, tags = None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let Some(f) = self.fetch_cfg.as_ref() else {
            return Err(PyValueError::new_err("this CacheCore has no defaults"));
        };
        let ttl = match ttl_arg(ttl)? {
            None => f.ttl,
            Some(t) => positive_ttl(t, "ttl")?,
        };
        let stale = f.stale_ttl.unwrap_or(0.0);
        let kb = check_key(key)?;
        let tags = tags_arg(tags)?;
        let hash = key.hash()? as u64;
        self.store(py, key, kb, hash, value, ttl, stale, &tags)
            .inspect_err(|e| {
                if e.is_instance_of::<ZigguratError>(py) {
                    self.write_failed(py, "set", key, e.clone_ref(py));
                }
            })
    }

    /// Caches a miss for `key` for `ttl` seconds, valid while the key's stamp
    /// is still `stamp` (read before the load started).
    #[pyo3(signature = (key, ttl, stamp, tags = None))]
    fn set_negative(
        &self,
        key: &Bound<'_, PyAny>,
        ttl: f64,
        stamp: u32,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ttl = positive_ttl(ttl, "neg_ttl")?;
        let kb = key_bytes(key)?;
        let tags = tags_arg(tags)?;
        self.store_negative(kb, ttl, stamp, &tags)
    }

    /// Counts one loader call that took `seconds` (for loads run from Python).
    fn record_load(&self, seconds: f64, ok: bool) {
        self.loads_done.record((seconds.max(0.0) * 1e9) as u64, ok);
    }

    /// (calls, errors, total ns, max ns) of the loader.
    fn loader_counts(&self) -> (u64, u64, u64, u64) {
        self.loads_done.counts()
    }

    /// Removes `key` from every tier; returns whether L2 held it.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let kb = key_bytes(key)?;
        let hash = key.hash()? as u64;
        let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
        match &self.main {
            Some(main) => main.delete(kb).map_err(err),
            None => Ok(false),
        }
    }

    /// Voids every entry carrying any of `tags`, in every process.
    fn invalidate_tags(&self, tags: &Bound<'_, PyAny>) -> PyResult<()> {
        let tags_obj = tags;
        let tags = tags_arg(Some(tags))?;
        for seg in [&self.main, &self.neg].into_iter().flatten() {
            for t in &tags {
                seg.invalidate_tag(t).map_err(err)?;
            }
        }
        if self.main.is_none() {
            self.l1_clear(tags_obj.py()); // no tag versions to check against
        }
        Ok(())
    }

    /// Empties every tier on this host.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.l1_clear(py);
        for seg in [&self.main, &self.neg].into_iter().flatten() {
            py.detach(|| seg.clear()).map_err(err)?;
        }
        Ok(())
    }

    /// Empties this process's L1 only.
    fn clear_l1(&self, py: Python<'_>) {
        self.l1_clear(py);
    }

    /// The key's current version stamp in the main segment (0 without one).
    fn stamp(&self, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        let kb = key_bytes(key)?;
        Ok(self
            .main_seg()
            .map_or(0, |m| m.stamp_word(&m.hash(kb)).load(Ordering::Acquire)))
    }

    /// Whether the cache runs without a segment (L1 and loader only).
    #[getter]
    fn degraded(&self) -> bool {
        self.main.is_none()
    }

    /// Counters of this process's tiers.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let (s, (items, neg_items)) = self
            .l1
            .try_with(py, |l1| (l1.stats, l1.counts()))
            .unwrap_or_default();
        d.set_item("l1_hits", s.hits)?;
        d.set_item("l1_misses", self.l1_misses.get())?;
        d.set_item("l1_stale_drops", s.stale)?;
        d.set_item("l1_evictions", s.evictions)?;
        d.set_item("l1_fills", s.fills)?;
        d.set_item("l1_items", items)?;
        d.set_item("l1_negative_items", neg_items)?;
        d.set_item("l2_hits", self.l2_hits.get())?;
        d.set_item("l2_misses", self.l2_misses.get())?;
        d.set_item("l2_stale_reads", self.l2_stale.get())?;
        d.set_item("negative_hits", self.neg_hits.get())?;
        d.set_item("decode_errors", self.decode_errors.get())?;
        Ok(d)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.l1.try_with(py, |l1| l1.len()).unwrap_or(0)
    }
}
