//! Reads below L1: a cache entry from the main segment (fresh, stale past its
//! soft deadline, or a miss), then the cached misses, filling this process's
//! L1 only when the key's stamp and the epoch held across the read.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ziggurat_cache::{
    FlightKey, Kind, L1Watch, Lookup, Missing, Payload, Reader, Trailer, Watch32,
};
use ziggurat_core::now_ms;

use crate::args::{check_key, key_hash, named};
use crate::convert::key_bytes;
use crate::core::{CacheCore, CopyMode};
use crate::l1::Entry;

/// What a read below L1 found (also the kinds of `lookup`).
pub const MISS: u8 = 0;

pub const HIT: u8 = 1;

pub const NEG: u8 = 2;

pub const STALE: u8 = 3;

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
    pub(crate) fn miss(m: Missing) -> Below {
        Below {
            kind: MISS,
            value: None,
            soft: 0,
            ttl_ms: 0,
            stamps: m.stamps,
            keys: m.keys,
        }
    }

    /// Whether the read found a cached miss.
    pub(crate) fn negative(&self) -> bool {
        self.kind == NEG
    }

    /// The value, when the read found a fresh one.
    pub(crate) fn fresh(self) -> Option<Py<PyAny>> {
        if self.kind == HIT {
            self.value
        } else {
            None
        }
    }

    fn found(kind: u8, value: Option<Py<PyAny>>, t: &Trailer, m: Missing) -> Below {
        Below {
            kind,
            value,
            soft: t.soft,
            ttl_ms: t.ttl_ms,
            stamps: m.stamps,
            keys: m.keys,
        }
    }
}

/// Payloads as Python bytes objects: what the serializer decodes. None when
/// the object cannot be made (no memory): that read is a miss, as the cache
/// never fails a call for want of room. (An option, not a result: the read
/// moves its payload several times, and an error makes it eight times larger.)
struct PyPayload<'py>(Python<'py>);

impl<'py> Payload for PyPayload<'py> {
    type Out = Option<Bound<'py, PyBytes>>;

    fn copied(&mut self, bytes: &[u8]) -> Self::Out {
        Some(PyBytes::new(self.0, bytes))
    }

    fn filled(&mut self, len: usize, fill: &dyn Fn(&mut [u8])) -> Self::Out {
        PyBytes::new_with(self.0, len, |buf| {
            fill(buf);
            Ok(())
        })
        .ok()
    }
}

/// An L1 entry for what a read found: `value` (None: a cached miss, the
/// caller's default), valid while the words of `fill` and the tags hold.
fn entry_of(
    key: &Bound<'_, PyAny>,
    hash: u64,
    value: Option<Py<PyAny>>,
    encoded: Option<Py<PyAny>>,
    t: &Trailer,
    tags: Vec<Watch32>,
    fill: L1Watch,
) -> Entry {
    let negative = value.is_none();
    Entry::new(
        key.clone().unbind(),
        hash,
        value.unwrap_or_else(|| key.py().None()),
        encoded,
        negative,
        Some(fill),
        tags.into_boxed_slice(),
        t.soft,
        t.ttl_ms,
    )
}

impl CacheCore {
    fn decode(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kind: Kind,
        payload: &Bound<'_, PyBytes>,
    ) -> Option<Py<PyAny>> {
        if kind == Kind::Counter {
            let b: [u8; 8] = payload.as_bytes().try_into().ok()?;
            return Some(
                i64::from_le_bytes(b)
                    .into_pyobject(py)
                    .ok()?
                    .into_any()
                    .unbind(),
            );
        }
        match self.loads(py, payload.as_any()) {
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
        self.read_below_with(py, key, key_bytes(key)?, hash, allow_stale, None)
    }

    /// `read_below`, for a key whose bytes `kb` the caller has, maybe hashed
    /// for both segments already (`keys`). The rules of the read are
    /// `ziggurat_cache::Reader`'s; this decodes, counts and fills L1.
    pub(crate) fn read_below_with(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        allow_stale: bool,
        keys: Option<FlightKey>,
    ) -> PyResult<Below> {
        let Some(main) = self.main.as_ref() else {
            return Ok(Below::miss(Missing::default()));
        };
        let reader = Reader::new(main, self.neg.as_deref(), self.l1_enabled);
        match reader.lookup(kb, keys, allow_stale, &mut PyPayload(py)) {
            Lookup::Fresh(found, before) => {
                let t = found.trailer;
                let Some((obj, payload)) = found
                    .payload
                    .and_then(|p| Some((self.decode(py, key, t.kind, &p)?, p)))
                else {
                    self.l2_misses.bump();
                    return Ok(Below::miss(reader.missing(&before, kb)));
                };
                self.l2_hits.bump();
                // A decode no L1 keeps is this call's own object: handed out
                // as is in every copy mode.
                let Some(fill) = found.fill else {
                    return Ok(Below::found(HIT, Some(obj), &t, Missing::default()));
                };
                let counter = t.kind == Kind::Counter;
                let (stored, encoded) = match self.mode {
                    CopyMode::Decode if !counter => (payload.clone().into_any().unbind(), None),
                    _ => (
                        obj.clone_ref(py),
                        (self.debug && !counter).then(|| payload.clone().into_any().unbind()),
                    ),
                };
                let e = entry_of(key, hash, Some(stored), encoded, &t, found.tags, fill);
                self.l1_put(key, e);
                let out = match self.mode {
                    // In decode mode L1 keeps the bytes, and in shared mode the
                    // same object: `obj` is the caller's.
                    CopyMode::Decode | CopyMode::Shared => obj,
                    CopyMode::Copy => self.out(py, &obj)?,
                };
                Ok(Below::found(HIT, Some(out), &t, Missing::default()))
            }
            Lookup::Stale(found, missing) => {
                let kind = found.trailer.kind;
                match found.payload.and_then(|p| self.decode(py, key, kind, &p)) {
                    Some(obj) => {
                        self.l2_stale.bump();
                        Ok(Below::found(STALE, Some(obj), &found.trailer, missing))
                    }
                    None => {
                        self.l2_misses.bump();
                        Ok(Below::miss(missing))
                    }
                }
            }
            Lookup::Negative(found) => {
                self.l2_misses.bump();
                self.neg_hits.bump();
                let t = found.trailer;
                if let Some(fill) = found.fill {
                    self.l1_put(key, entry_of(key, hash, None, None, &t, found.tags, fill));
                }
                Ok(Below::found(NEG, None, &t, Missing::default()))
            }
            Lookup::Miss(missing) => {
                self.l2_misses.bump();
                Ok(Below::miss(missing))
            }
        }
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
        if b.negative() {
            return Ok(Some(py.None()));
        }
        Ok(b.fresh())
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
