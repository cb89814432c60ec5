//! The bodies the tier stores in Redis, and the notes of a host's writes
//! (`ziggurat.cluster.bodies`, `write_times`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use ziggurat_cluster as zc;

use super::signer::ClusterSigner;

/// The signed body of a value under `key`: `data` is the serializer's bytes,
/// or an int within ±2**53 (which `incr` may add to), expiring at `expiry_ms`
/// (0: never), written at `w` (µs).
///
/// >>> s = ClusterSigner("doc", [b"0123456789abcdef"])
/// >>> body = cluster_encode(s, b"k", 7, 0, 1, ["t"])
/// >>> body[:2], cluster_decode(s, b"k", body, -1, 2, False)[:2]
/// (b'Z2', ('I', 7))
#[pyfunction]
pub fn cluster_encode<'py>(
    py: Python<'py>,
    signer: &ClusterSigner,
    key: &[u8],
    data: &Bound<'py, PyAny>,
    expiry_ms: u64,
    w: u64,
    tags: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes;
    let data = if let Ok(b) = data.cast::<PyBytes>() {
        bytes = b.clone();
        zc::Data::Encoded(bytes.as_bytes())
    } else {
        zc::Data::Int(data.extract::<i64>()?)
    };
    let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
    Ok(PyBytes::new(
        py,
        &zc::encode_value(&signer.0, key, data, expiry_ms, w, &tags),
    ))
}

/// The 24 bytes of a counter's body before its tags once `incr` at `w`
/// leaves it: the mark that signs `key` with `w`, then `w`.
///
/// >>> len(cluster_counter_head(ClusterSigner("doc", [b"0123456789abcdef"]), b"hits", 1))
/// 24
#[pyfunction]
pub fn cluster_counter_head<'py>(
    py: Python<'py>,
    signer: &ClusterSigner,
    key: &[u8],
    w: u64,
) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &zc::counter_head(&signer.0, key, w))
}

/// The body under `key` checked and read at `now_us` (µs since the epoch):
/// `(kind, data, seconds left, tags, written)` with kind `"P"` (data: the
/// serializer's bytes), `"I"` (an int) or `"N"` (a counter's count), or why it
/// is refused, `(why, written)`: `"bad"` (MAC or format; written 0),
/// `"expired"` or `"ahead"`. `stored` holds the scripts' prefix first when
/// `prefixed`; `pttl` is the ms Redis keeps a counter (-1: no expiry).
///
/// >>> cluster_decode(ClusterSigner("doc", [b"0123456789abcdef"]), b"k", b"junk", -1, 0, False)
/// ('bad', 0)
#[pyfunction]
pub fn cluster_decode(
    py: Python<'_>,
    signer: &ClusterSigner,
    key: &[u8],
    stored: &[u8],
    pttl: i64,
    now_us: u64,
    prefixed: bool,
) -> PyResult<Py<PyAny>> {
    let body = if prefixed {
        match zc::strip_prefix(stored) {
            Some(b) => b,
            None => return Ok(("bad", 0u64).into_pyobject(py)?.into_any().unbind()),
        }
    } else {
        stored
    };
    let got = match zc::decode(&signer.0, key, body, pttl, now_us) {
        Ok(d) => d,
        Err(r) => {
            let why = match r {
                zc::Refused::Bad => ("bad", 0),
                zc::Refused::Expired(w) => ("expired", w),
                zc::Refused::Ahead(w) => ("ahead", w),
            };
            return Ok(why.into_pyobject(py)?.into_any().unbind());
        }
    };
    let (kind, data) = match got.found {
        zc::Found::Encoded(b) => ("P", PyBytes::new(py, b).into_any()),
        zc::Found::Int(i) => ("I", i.into_pyobject(py)?.into_any()),
        zc::Found::Counter(i) => ("N", i.into_pyobject(py)?.into_any()),
    };
    let tags = PyTuple::new(py, got.tags)?;
    Ok((kind, data, got.left_s, tags, got.written)
        .into_pyobject(py)?
        .into_any()
        .unbind())
}

/// Where the body of a stored value starts, past the scripts' prefix, or None
/// for a prefix that does not add up.
///
/// >>> cluster_body_start(b"\x01\x00\x01t\x011body"), cluster_body_start(b"\x02")
/// (6, None)
#[pyfunction]
pub fn cluster_body_start(stored: &[u8]) -> Option<usize> {
    zc::strip_prefix(stored).map(|b| stored.len() - b.len())
}
