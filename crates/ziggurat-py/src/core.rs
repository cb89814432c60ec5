//! `CacheCore`: the native half of `ziggurat.Cache`. It owns the L1 and reads
//! and writes the L2 segments, so that a `get` that hits L1 is one call into
//! the extension. Loader coordination, serializer choice and the friendly API
//! live in the Python package.
//!
//! The entry format (payload and trailer, counters) and the writes that read
//! first (`add`, `incr`, `touch`) live in the `ziggurat-cache` crate, shared
//! with every front end. A cached miss lives in a second, smaller segment (its
//! own byte budget) with payload `main_stamp:u32`: it only counts while the
//! key's stamp in the main segment still has that value, so any later set or
//! delete of the key voids it.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyKeyError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PySet, PyTuple};
use ziggurat_cache::{Kind, Lifetime, Trailer, UpdateError, TRAILER_LEN};
use ziggurat_core::now_ms;
use ziggurat_core::Segment;
use ziggurat_core::TagRef;

use crate::codec::AutoCodec;
use crate::convert::{err, key_bytes, tags_arg, ttl_arg, ZigguratError};
use crate::fetch::Step;
use crate::l1::{Entry, Shared, Watch32, Watch64, L1};
use crate::segment::PySegment;

create_exception!(
    _native,
    MutationError,
    ZigguratError,
    "A cached object was changed by its caller (raised in debug mode)."
);

const READ_TRIES: usize = 4;

/// How `get` hands out cached objects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CopyMode {
    Shared,
    Copy,
    Decode,
}

/// What a read below L1 found (also the kinds of `lookup`).
pub const MISS: u8 = 0;
pub const HIT: u8 = 1;
pub const NEG: u8 = 2;
pub const STALE: u8 = 3;

struct Read {
    payload: Py<PyBytes>,
    kind: Kind,
    soft: u64,
    ttl_ms: u32,
    tags: Vec<Watch32>,
}

/// What a read below L1 found. `stamps` packs the key's stamps in the main and
/// cached-miss segments, as read before a probe that found no fresh value: a
/// later lease holder compares them instead of probing again.
pub(crate) struct Below {
    pub kind: u8,
    pub value: Option<Py<PyAny>>,
    pub soft: u64,
    pub ttl_ms: u32,
    pub stamps: Option<u64>,
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
        ziggurat_cache::snapshot(main_stamp, neg_stamp)
    }
}

/// A counter bumped with the GIL held (a plain load and store suffice).
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn bump(&self) -> u64 {
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

/// The cache-wide defaults that writes and loads use.
pub(crate) struct FetchConfig {
    pub ttl: f64,
    pub neg_ttl: Option<f64>,
    pub stale_ttl: Option<f64>,
    pub jitter: f64,
    pub loader_timeout: f64,
}

/// Loader calls, errors, latency and the miss path's events (bumped with the
/// GIL held).
#[derive(Default)]
pub(crate) struct LoadCounts {
    calls: Counter,
    errors: Counter,
    total_ns: Counter,
    max_ns: AtomicU64,
    pub waits: Counter,
    pub takeovers: Counter,
    pub stale_served: Counter,
    pub refreshes: Counter,
}

impl LoadCounts {
    pub(crate) fn record(&self, ns: u64, ok: bool) {
        self.calls.bump();
        if !ok {
            self.errors.bump();
        }
        self.total_ns.0.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("calls", self.calls.get())?;
        d.set_item("errors", self.errors.get())?;
        d.set_item("total_ns", self.total_ns.get())?;
        d.set_item("max_ns", self.max_ns.load(Ordering::Relaxed))?;
        d.set_item("waits", self.waits.get())?;
        d.set_item("takeovers", self.takeovers.get())?;
        d.set_item("stale_served", self.stale_served.get())?;
        d.set_item("refreshes", self.refreshes.get())?;
        Ok(d)
    }
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
// Named "Cache" in Python: argument errors that Python itself raises for the
// native methods then read "Cache.set() takes ...", naming the public method.
#[pyclass(name = "Cache", module = "ziggurat._native", frozen)]
pub struct CacheCore {
    pub(crate) main: Option<Arc<Segment>>,
    pub(crate) neg: Option<Arc<Segment>>,
    l1: Shared,
    l1_enabled: bool,
    loads: Py<PyAny>,
    dumps: Py<PyAny>,
    /// Set when the serializer is the native "auto" codec: called without Python.
    codec: Option<Py<AutoCodec>>,
    mode: CopyMode,
    debug: bool,
    /// Called as `(step, loader)` to run an early refresh in the background.
    pub(crate) refresh: Option<Py<PyAny>>,
    /// Called as `(step, loader)` for a miss without a segment (degraded).
    pub(crate) local: Option<Py<PyAny>>,
    /// Fraction of the TTL at its end in which a `fetch` hit starts a refresh.
    pub(crate) refresh_ahead: f64,
    /// The cache's defaults.
    pub(crate) cfg: FetchConfig,
    /// Called as `(what, key, exception)` when a write made for `fetch` fails,
    /// or a stored value cannot be decoded (`what` is "decode").
    on_write_error: Option<Py<PyAny>>,
    /// Without a segment, the longest an L1 entry may live (degraded="local"),
    /// which bounds how long a process serves a value another process replaced.
    degraded_ttl: Option<f64>,
    pub(crate) loads_done: LoadCounts,
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
            Watch32::of(seg.tag_watch(r.cell), r.version)
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
                if f.val_len < TRAILER_LEN {
                    break; // not written by a cache: ignore
                }
                let n = f.val_len - TRAILER_LEN;
                let payload = PyBytes::new_with(py, n, |buf| {
                    let mut all = f;
                    all.val_len = n;
                    seg.copy_value(&all, buf);
                    Ok(())
                })?;
                let mut tr = [0u8; TRAILER_LEN];
                let mut tail = f;
                tail.val_off += n;
                tail.val_len = TRAILER_LEN;
                seg.copy_value(&tail, &mut tr);
                if seg.confirm(&kh, &f) {
                    let Some(t) = Trailer::parse(&tr) else {
                        break; // not written by a cache: ignore
                    };
                    return Ok(Some(Read {
                        payload: payload.unbind(),
                        kind: t.kind,
                        soft: t.soft,
                        ttl_ms: t.ttl_ms,
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

/// The hash of a key argument; a key of the wrong type is reported as such
/// (not as "unhashable").
#[inline(always)]
fn key_hash(key: &Bound<'_, PyAny>) -> PyResult<u64> {
    match key.hash() {
        Ok(h) => Ok(h as u64),
        Err(e) => Err(check_key(key).err().unwrap_or(e)),
    }
}

/// Puts the public method's name in front of a bad-input error, so every
/// method reports the same input the same way ("Cache.set(): ttl must be
/// ..."). Other errors pass unchanged.
#[inline(always)]
fn named<T>(py: Python<'_>, method: &str, r: PyResult<T>) -> PyResult<T> {
    r.map_err(|e| {
        let bad_input = e.is_instance_of::<PyTypeError>(py)
            || e.is_instance_of::<PyValueError>(py)
            || e.is_instance_of::<PyOverflowError>(py);
        if !bad_input || e.is_instance_of::<PyKeyError>(py) {
            return e;
        }
        let msg = e.value(py).str().map(|m| m.to_string()).unwrap_or_default();
        if msg.starts_with("Cache.") {
            return e;
        }
        let out = PyErr::from_type(e.get_type(py), format!("{method}(): {msg}"));
        out.set_cause(py, e.cause(py));
        out
    })
}

/// A loader's result, unless it is an awaitable: `fetch` cannot await it, and
/// caching the coroutine object would be wrong. The coroutine is closed so
/// Python does not warn that it was never awaited.
pub(crate) fn refuse_awaitable(v: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    if v.hasattr(pyo3::intern!(v.py(), "__await__"))? {
        if v.hasattr(pyo3::intern!(v.py(), "close"))? {
            let _ = v.call_method0(pyo3::intern!(v.py(), "close"));
        }
        return Err(PyTypeError::new_err(
            "loader returned an awaitable; use afetch() for async loaders",
        ));
    }
    Ok(v)
}

/// Checks the optional TTL arguments of a call (None means the cache's).
fn check_ttls(args: [(Option<&Bound<'_, PyAny>>, &str); 3]) -> PyResult<()> {
    for (a, name) in args {
        if let Some(v) = ttl_arg(a)? {
            positive_ttl(v, name)?;
        }
    }
    Ok(())
}

/// A TTL argument checked by the shared rule; `what` names the argument.
pub(crate) fn positive_ttl(ttl: f64, what: &str) -> PyResult<f64> {
    match Lifetime::from_seconds(ttl, 0.0) {
        Ok(_) => Ok(ttl),
        Err(m) => Err(PyValueError::new_err(format!("{what} {m}"))),
    }
}

/// The entry's lifetime for `ttl` and `stale` seconds (both already checked).
fn lifetime(ttl: f64, stale: f64) -> Lifetime {
    Lifetime::from_seconds(ttl, stale).unwrap_or(Lifetime {
        ttl_ms: None,
        stale_ms: 0,
    })
}

/// The counter payload of an exact `int` that fits in 64 bits: such values are
/// stored natively, so `incr` can change them in place whatever the serializer.
fn as_counter(value: &Bound<'_, PyAny>) -> Option<i64> {
    if value.is_exact_instance_of::<PyInt>() {
        value.extract::<i64>().ok()
    } else {
        None
    }
}

/// An int argument that fits in 64 bits (not a bool).
fn int64(v: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    if !v.is_instance_of::<PyInt>() || v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            v.get_type().name()?
        )));
    }
    v.extract::<i64>().map_err(|_| {
        PyOverflowError::new_err(format!("{what} must fit in a signed 64-bit integer"))
    })
}

/// Maps a failed `incr` to the exception Python callers expect.
fn incr_error(py: Python<'_>, key: &Bound<'_, PyAny>, e: UpdateError) -> PyErr {
    let k = key.repr().map(|r| r.to_string()).unwrap_or_default();
    match e {
        UpdateError::Missing => PyKeyError::new_err(key.clone().unbind()),
        UpdateError::NotInteger => PyTypeError::new_err(format!(
            "Cache.incr(): the value of {k} is not an integer; only values stored as an \
             int (or created by incr) can be incremented"
        )),
        UpdateError::Overflow => PyOverflowError::new_err(format!(
            "Cache.incr(): the counter {k} would leave the signed 64-bit range"
        )),
        UpdateError::Segment(e) => {
            let _ = py;
            err(e)
        }
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
            // Counters are kept as int objects, which are immutable.
            CopyMode::Decode if v.bind(py).is_exact_instance_of::<PyInt>() => Ok(v.clone_ref(py)),
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
            if r.kind == Kind::Value || r.kind == Kind::Counter {
                let stale = r.soft != 0 && now >= r.soft;
                if stale && !allow_stale {
                    self.l2_misses.bump();
                    return Ok(Below::miss(s1, neg_now()));
                }
                let Some(obj) = self.decode(py, key, r.kind, &r.payload) else {
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
                    let counter = r.kind == Kind::Counter;
                    let (stored, encoded) = match self.mode {
                        CopyMode::Decode if !counter => (r.payload.clone_ref(py).into_any(), None),
                        _ => (
                            obj.clone_ref(py),
                            (self.debug && !counter).then(|| r.payload.clone_ref(py).into_any()),
                        ),
                    };
                    let e = Entry::new(
                        key.clone().unbind(),
                        hash,
                        stored,
                        encoded,
                        false,
                        Some(Watch32::of(main.stamp_watch(&kh), s1)),
                        Some(Watch64::of(main.epoch_watch(), e1)),
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
                    if r.kind == Kind::Negative
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
                                Some(Watch32::of(main.stamp_watch(&kh), s1)),
                                Some(Watch64::of(main.epoch_watch(), e1)),
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

    /// The bytes and kind `value` is stored as: a counter for an exact `int`
    /// in 64 bits, else what the serializer makes of it.
    fn encode_value<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyBytes>, Kind)> {
        if let Some(n) = as_counter(value) {
            return Ok((PyBytes::new(py, &n.to_le_bytes()), Kind::Counter));
        }
        // Any failure to encode (an unpicklable object) is the caller's bad input.
        let enc = self.dumps(py, value).map_err(|e| {
            let t = PyTypeError::new_err(format!("cannot serialize the value for this cache: {e}"));
            t.set_cause(py, Some(e));
            t
        })?;
        match enc.cast_into::<PyBytes>() {
            Ok(b) => Ok((b, Kind::Value)),
            Err(_) => Err(PyTypeError::new_err(
                "the serializer's dumps must return bytes",
            )),
        }
    }

    /// Encodes and writes `value` (arguments already checked), then keeps the
    /// object in this process's L1.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store(
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
        let (enc, kind) = self.encode_value(py, value)?;
        let counter = kind == Kind::Counter;
        let payload: &[u8] = enc.as_bytes();
        let Some(main) = self.main.as_ref() else {
            let ttl = self.degraded_ttl.map_or(ttl, |cap| ttl.min(cap));
            let life = lifetime(ttl, stale);
            // Degraded: no segment. Keep a private copy in L1 only: the encoded
            // bytes in decode mode (decoded per get), else a decoded object.
            let obj = match self.mode {
                _ if counter => value.clone().unbind(),
                CopyMode::Decode => enc.clone().into_any().unbind(),
                _ => self.loads(py, enc.as_any())?,
            };
            let t = Trailer::starting_now(kind, life.ttl_ms);
            let e = Entry::new(
                key.clone().unbind(),
                hash,
                obj,
                None,
                false,
                None,
                None,
                Box::new([]),
                t.soft,
                t.ttl_ms,
            );
            self.l1_put(key, e);
            return Ok(());
        };
        let life = lifetime(ttl, stale);
        let t = Trailer::starting_now(kind, life.ttl_ms);
        let buf = ziggurat_cache::encode(payload, &t);
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
        main.set_hashed(kb, &kh, &buf, life.record_ttl(), &tag_refs)
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
                // Ints are immutable: every mode may keep the object itself.
                _ if counter => (value.clone().unbind(), None),
                CopyMode::Decode => (enc.clone().into_any().unbind(), None),
                // "copy" promises callers their own objects: keep a private decode, not
                // the caller's object, which the caller may still change.
                CopyMode::Copy => match self.loads(py, enc.as_any()) {
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
                    self.debug.then(|| enc.clone().into_any().unbind()),
                ),
            };
            // Replaces this process's previous entry for the key, if any.
            let e = Entry::new(
                key.clone().unbind(),
                hash,
                stored,
                encoded,
                false,
                Some(Watch32::of(main.stamp_watch(&kh), s1)),
                Some(Watch64::of(main.epoch_watch(), e0)),
                tag_watches(main, &arr, n).into_boxed_slice(),
                t.soft,
                t.ttl_ms,
            );
            self.l1_put(key, e);
        } else {
            // Stale now anyway (its stamp moved); drop it to free the slot.
            let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
        }
        Ok(())
    }

    /// Writes a cached miss of `kb` valid while its main stamp is `stamp`.
    pub(crate) fn store_negative(
        &self,
        kb: &[u8],
        ttl: f64,
        stamp: u32,
        tags: &[Vec<u8>],
    ) -> PyResult<()> {
        let Some(neg) = self.neg.as_ref() else {
            return Ok(());
        };
        let life = lifetime(ttl, 0.0);
        let t = Trailer::starting_now(Kind::Negative, life.ttl_ms);
        let buf = ziggurat_cache::encode(&stamp.to_le_bytes(), &t);
        let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
        neg.set(kb, &buf, life.record_ttl(), &tag_refs).map_err(err)
    }

    /// Reports a failed write to the Python side (logged and counted there).
    pub(crate) fn write_failed(
        &self,
        py: Python<'_>,
        what: &str,
        key: &Bound<'_, PyAny>,
        e: PyErr,
    ) {
        if let Some(hook) = &self.on_write_error {
            if let Err(e2) = hook.call1(py, (what, key, e.value(py))) {
                e2.print(py);
            }
        }
    }

    /// A number in [0, 1) for TTL jitter (xorshift; races between threads
    /// only mix the state further).
    pub(crate) fn jitter_draw(&self) -> f64 {
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

    /// The main segment and the cache's defaults, for writes that need both.
    fn writable(&self) -> PyResult<(&Arc<Segment>, &FetchConfig)> {
        match self.main.as_ref() {
            Some(m) => Ok((m, &self.cfg)),
            None => Err(ZigguratError::new_err("the cache has no shared segment")),
        }
    }

    fn main_seg(&self) -> Option<&Arc<Segment>> {
        self.main.as_ref()
    }
}

#[pymethods]
impl CacheCore {
    #[new]
    #[pyo3(signature = (main, neg, l1_items, l1_neg_items, loads, dumps, fetch_defaults, copy = "shared", debug = false, refresh = None, local = None, refresh_ahead = 0.0, on_write_error = None, codec = None, degraded_ttl = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        main: Option<&Bound<'_, PySegment>>,
        neg: Option<&Bound<'_, PySegment>>,
        l1_items: usize,
        l1_neg_items: usize,
        loads: Py<PyAny>,
        dumps: Py<PyAny>,
        fetch_defaults: FetchDefaults,
        copy: &str,
        debug: bool,
        refresh: Option<Py<PyAny>>,
        local: Option<Py<PyAny>>,
        refresh_ahead: f64,
        on_write_error: Option<Py<PyAny>>,
        codec: Option<Py<AutoCodec>>,
        degraded_ttl: Option<f64>,
    ) -> PyResult<Self> {
        let (ttl, neg_ttl, stale_ttl, jitter, loader_timeout) = fetch_defaults;
        let cfg = FetchConfig {
            ttl,
            neg_ttl,
            stale_ttl,
            jitter,
            loader_timeout,
        };
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
            refresh,
            local,
            refresh_ahead,
            cfg,
            on_write_error,
            degraded_ttl,
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
        named(
            py,
            "Cache.get",
            (|| {
                let hash = key_hash(key)?;
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
            })(),
        )
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
        named(
            py,
            "Cache.fetch",
            (|| {
                let hash = key_hash(key)?;
                if ttl.is_some() || neg_ttl.is_some() || stale_ttl.is_some() {
                    check_ttls([(ttl, "ttl"), (neg_ttl, "neg_ttl"), (stale_ttl, "stale_ttl")])?;
                }
                // An L1 hit is answered here; one due for early refresh also
                // starts the refresh.
                let due_hit =
                    if self.mode == CopyMode::Shared && !self.debug && self.refresh_ahead == 0.0 {
                        match self.l1_shared(py, key, hash) {
                            Quick::Value(v) => return Ok(v),
                            Quick::Negative => return Ok(py.None()),
                            Quick::Miss => None,
                        }
                    } else if let Some(e) = self.l1_hit(py, key, hash) {
                        if e.negative {
                            return Ok(py.None());
                        }
                        if self.debug {
                            self.check_mutation(py, key, &e)?;
                        }
                        let v = self.out(py, &e.value)?;
                        if !self.due(e.deadline, e.ttl_ms) {
                            return Ok(v);
                        }
                        Some(v)
                    } else {
                        None
                    };
                check_key(key)?;
                let plan = self.plan(ttl, tags, neg_ttl, stale_ttl)?;
                if let Some(v) = due_hit {
                    let step =
                        self.py_begin(py, key, &plan, Some((v.clone_ref(py), true)), hash)?;
                    if let Some(r) = self.py_refresh_of(py, step.get())? {
                        if let Some(hook) = self.refresh.as_ref() {
                            hook.call1(py, (r, loader))?;
                        }
                    }
                    return Ok(v);
                }
                self.l1_misses.bump();
                self.fetch_miss(py, key, hash, loader, &plan)
            })(),
        )
    }

    // The hooks are usually bound methods of the Cache that owns this core: a
    // cycle, which the garbage collector can only see through this.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.loads)?;
        visit.call(&self.dumps)?;
        for h in [&self.refresh, &self.local].into_iter().flatten() {
            visit.call(h)?;
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
        named(
            py,
            "Cache.fetch",
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
            })(),
        )
    }

    /// Encodes and stores `value`. `ttl` and `stale_ttl` in seconds.
    #[pyo3(signature = (key, value, ttl, tags = None, stale_ttl = None))]
    fn store_value(
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
        let hash = key_hash(key)?;
        self.store(py, key, kb, hash, value, ttl, stale, &tags)
    }

    /// `Cache.set`: `ttl` defaults to the cache's, `stale_ttl` is the cache's.
    /// A failed write (lock timeout, segment error) is reported to the write
    /// error hook (logged and counted) and raised.
    #[pyo3(signature = (key, value, *, ttl = None, tags = None))]
    fn set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        named(
            py,
            "Cache.set",
            (|| {
                let f = &self.cfg;
                let ttl = match ttl_arg(ttl)? {
                    None => f.ttl,
                    Some(t) => positive_ttl(t, "ttl")?,
                };
                let stale = f.stale_ttl.unwrap_or(0.0);
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                let hash = key_hash(key)?;
                self.store(py, key, kb, hash, value, ttl, stale, &tags)
                    .inspect_err(|e| {
                        if e.is_instance_of::<ZigguratError>(py) {
                            self.write_failed(py, "set", key, e.clone_ref(py));
                        }
                    })
            })(),
        )
    }

    /// `Cache.add`: stores `value` only if `key` holds no fresh value (one
    /// winner among every process of the host); returns whether it stored.
    #[pyo3(signature = (key, value, *, ttl = None, tags = None))]
    fn add(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        named(
            py,
            "Cache.add",
            (|| {
                let (main, f) = self.writable()?;
                let ttl = match ttl_arg(ttl)? {
                    None => f.ttl,
                    Some(t) => positive_ttl(t, "ttl")?,
                };
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                let (enc, kind) = self.encode_value(py, value)?;
                let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
                let life = lifetime(ttl, f.stale_ttl.unwrap_or(0.0));
                ziggurat_cache::add(main, kb, enc.as_bytes(), kind, &life, &tag_refs).map_err(err)
            })(),
        )
    }

    /// `Cache.incr`: adds `delta` to the counter under `key`, atomically for
    /// every process of the host; a missing key starts from `default` (with the
    /// cache's TTL) or raises `KeyError`.
    #[pyo3(signature = (key, delta = None, *, default = None))]
    fn incr(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        delta: Option<&Bound<'_, PyAny>>,
        default: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i64> {
        named(
            py,
            "Cache.incr",
            (|| {
                let delta = match delta {
                    None => 1,
                    Some(d) => int64(d, "delta")?,
                };
                let default = match default {
                    Some(d) if !d.is_none() => Some(int64(d, "default")?),
                    _ => None,
                };
                let (main, f) = self.writable()?;
                let kb = check_key(key)?;
                let life = lifetime(f.ttl, f.stale_ttl.unwrap_or(0.0));
                ziggurat_cache::incr(main, kb, delta, default.map(|d| (d, &life, &[][..])))
                    .map_err(|e| incr_error(py, key, e))
            })(),
        )
    }

    /// `Cache.touch`: a new lifetime of `ttl` seconds from now for the fresh
    /// value under `key`; whether there was one.
    #[pyo3(signature = (key, ttl = None))]
    fn touch(&self, key: &Bound<'_, PyAny>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        named(
            key.py(),
            "Cache.touch",
            (|| {
                let (main, f) = self.writable()?;
                let ttl = match ttl_arg(ttl)? {
                    None => f.ttl,
                    Some(t) => positive_ttl(t, "ttl")?,
                };
                let kb = check_key(key)?;
                let life = lifetime(ttl, f.stale_ttl.unwrap_or(0.0));
                ziggurat_cache::touch(main, kb, &life).map_err(err)
            })(),
        )
    }

    /// Counters of the loader and the miss path in this process.
    fn loader_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.loads_done.as_dict(py)
    }

    /// `afetch`'s first step: the L1 hit, or the first step of the miss.
    #[pyo3(signature = (key, *, ttl = None, tags = None, neg_ttl = None, stale_ttl = None))]
    fn fetch_begin(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        neg_ttl: Option<&Bound<'_, PyAny>>,
        stale_ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Step>> {
        named(
            py,
            "Cache.afetch",
            (|| {
                let hash = key_hash(key)?;
                check_key(key)?;
                let plan = self.plan(ttl, tags, neg_ttl, stale_ttl)?;
                if let Some(e) = self.l1_hit(py, key, hash) {
                    let v = if e.negative {
                        py.None()
                    } else {
                        if self.debug {
                            self.check_mutation(py, key, &e)?;
                        }
                        self.out(py, &e.value)?
                    };
                    let due = !e.negative && self.due(e.deadline, e.ttl_ms);
                    return self.py_begin(py, key, &plan, Some((v, due)), hash);
                }
                self.l1_misses.bump();
                self.py_begin(py, key, &plan, None, hash)
            })(),
        )
    }

    /// The refresh a HIT step started (this process took the refresh lease):
    /// run the loader in the background, then `fetch_done` or `fetch_failed`.
    fn fetch_refresh(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<Option<Py<Step>>> {
        self.py_refresh_of(py, step.get())
    }

    /// WAIT: sleeps (without the GIL) until the loader holding the key's lease
    /// finishes or a slice passes; raises `LoadTimeout` past `loader_timeout`.
    fn fetch_wait(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<()> {
        self.py_wait(py, step.get())
    }

    /// The step after a wait.
    fn fetch_next(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<Py<Step>> {
        self.py_next(py, step.get())
    }

    /// LOAD, LOCAL or a refresh: the loader returned `value` after `seconds`;
    /// stores it and gives the lease back; returns `value`.
    fn fetch_done(
        &self,
        py: Python<'_>,
        step: &Bound<'_, Step>,
        value: &Bound<'_, PyAny>,
        seconds: f64,
    ) -> PyResult<Py<PyAny>> {
        self.py_done(py, step.get(), value.clone(), seconds)
    }

    /// The loader raised after `seconds`: gives the lease back; returns
    /// `(True, stale value)` when fail-safe answers with one, else `(False, None)`.
    fn fetch_failed(
        &self,
        py: Python<'_>,
        step: &Bound<'_, Step>,
        seconds: f64,
    ) -> (bool, Py<PyAny>) {
        match self.py_failed(py, step.get(), seconds) {
            Some(v) => (true, v),
            None => (false, py.None()),
        }
    }

    /// The loading task was cancelled: gives the lease back, storing nothing.
    fn fetch_abandon(&self, py: Python<'_>, step: &Bound<'_, Step>) {
        self.py_abandon(py, step.get())
    }

    /// Removes `key` from every tier; returns whether L2 held it.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        named(
            key.py(),
            "Cache.delete",
            (|| {
                let kb = check_key(key)?;
                let hash = key_hash(key)?;
                let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
                match &self.main {
                    Some(main) => main.delete(kb).map_err(err),
                    None => Ok(false),
                }
            })(),
        )
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
