//! The events of the stream: their signed fields, their check, their order
//! (`ziggurat.cluster.events`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use ziggurat_cluster as zc;

use super::signer::ClusterSigner;

/// What an event's MAC covers: each field after its length, then `w`.
///
/// >>> cluster_signed_body("h1", "del", b"k", 7)[:10]
/// b'\x00\x00\x00\x02h1\x00\x00\x00\x03'
#[pyfunction]
pub fn cluster_signed_body<'py>(
    py: Python<'py>,
    host: &str,
    op: &str,
    k: &[u8],
    w: u64,
) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &zc::signed_body(host, op, k, w))
}

/// The `k` field of an event about `tags`: a JSON list.
///
/// >>> cluster_tags_field(["a", "\x00ns:x"])
/// b'["a","\\u0000ns:x"]'
#[pyfunction]
pub fn cluster_tags_field(py: Python<'_>, tags: Vec<String>) -> Bound<'_, PyBytes> {
    let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
    PyBytes::new(py, &zc::tags_field(&tags))
}

/// What a host does with an event numbered `seq` after `last`: 1 apply, 2 a
/// gap (clear), 3 the sequence went back (clear). Numbers below 0 went back.
///
/// >>> cluster_follow(41, 42), cluster_follow(41, 45), cluster_follow(41, 3)
/// (1, 2, 3)
#[pyfunction]
pub fn cluster_follow(last: i64, seq: i64) -> u8 {
    if last < 0 || seq < 0 {
        return 3;
    }
    match zc::follow(last as u64, seq as u64) {
        zc::Next::Apply => 1,
        zc::Next::Gap => 2,
        zc::Next::Back => 3,
    }
}

/// The fields of a stream entry as the crate reads them.
pub(super) fn entry_fields<'py>(
    fields: &Bound<'py, PyDict>,
) -> Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    fields
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.cast_into::<PyBytes>().ok()?,
                v.cast_into::<PyBytes>().ok()?,
            ))
        })
        .collect()
}

pub(super) fn slices<'a>(
    owned: &'a [(Bound<'_, PyBytes>, Bound<'_, PyBytes>)],
) -> Vec<(&'a [u8], &'a [u8])> {
    owned
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect()
}

/// `(seq, gen)` of an entry the reading host wrote itself (passed without its
/// MAC: only its place matters), or None when malformed.
///
/// >>> cluster_place({b"s": b"7", b"h": b"h1", b"g": b"12"}), cluster_place({b"s": b"x"})
/// ((7, 12), None)
#[pyfunction]
pub fn cluster_place(fields: &Bound<'_, PyDict>) -> Option<(u64, u64)> {
    let owned = entry_fields(fields);
    zc::place(&slices(&owned))
}

/// The event in a stream entry's `fields` as `(seq, host, op, keys, gen, w)`
/// (`keys`: the key, or the tags), or None when it is malformed or its MAC
/// does not check.
///
/// >>> s = ClusterSigner("c", [b"0123456789abcdef"])
/// >>> f = {b"s": b"7", b"h": b"h1", b"o": b"del", b"k": b"x", b"w": b"5"}
/// >>> f[b"m"] = s.event_mac(cluster_signed_body("h1", "del", b"x", 5))
/// >>> cluster_parse(f, s), cluster_parse({**f, b"k": b"y"}, s)
/// ((7, 'h1', 'del', (b'x',), 0, 5), None)
#[pyfunction]
pub fn cluster_parse<'py>(
    py: Python<'py>,
    fields: &Bound<'py, PyDict>,
    signer: &ClusterSigner,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let owned = entry_fields(fields);
    let Some(e) = zc::parse(&slices(&owned), &signer.0) else {
        return Ok(None);
    };
    Ok(Some(event_tuple(py, e)?))
}

/// An event as `(seq, host, op, keys, gen, w)`; `keys` the key, or the tags.
pub(super) fn event_tuple(py: Python<'_>, e: zc::Event) -> PyResult<Bound<'_, PyTuple>> {
    let keys = match e.about {
        zc::About::Key(k) => PyTuple::new(py, [PyBytes::new(py, &k)])?,
        zc::About::Tags(t) => PyTuple::new(py, t)?,
    };
    PyTuple::new(
        py,
        [
            e.seq.into_pyobject(py)?.into_any(),
            e.host.into_pyobject(py)?.into_any(),
            e.op.into_pyobject(py)?.into_any(),
            keys.into_any(),
            e.gen.into_pyobject(py)?.into_any(),
            e.w.into_pyobject(py)?.into_any(),
        ],
    )
}
