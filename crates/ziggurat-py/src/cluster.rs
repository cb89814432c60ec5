//! The cluster tier's rules (ziggurat-cluster) for `ziggurat.cluster`: the
//! signer, the bodies, the events and the scripts. Python keeps the tier's I/O,
//! its serializer and its words; each function here converts and calls the crate.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use ziggurat_cluster as zc;

/// Signs and checks the values, counters and events of the cache `name` (its
/// segment's name): the first of `secrets` signs, every one verifies.
///
/// >>> s = ClusterSigner("shop", [b"new-secret-0123456789", b"old-secret-0123456789"])
/// >>> mac = s.value_mac(b"user:1", b"payload")
/// >>> s.value_ok(b"user:1", b"payload", mac), s.value_ok(b"user:2", b"payload", mac)
/// (True, False)
#[pyclass(frozen, module = "ziggurat._native")]
pub struct ClusterSigner(zc::Signer);

#[pymethods]
impl ClusterSigner {
    #[new]
    fn new(name: &str, secrets: Vec<Vec<u8>>) -> PyResult<Self> {
        zc::Signer::new(name.as_bytes(), &secrets)
            .map(ClusterSigner)
            .map_err(|p| {
                PyValueError::new_err(match p {
                    zc::SecretProblem::None => "secret must name at least one secret".to_string(),
                    zc::SecretProblem::Short(i) => format!(
                        "secret {i} must be at least {} bytes (each of them, for a list)",
                        zc::MIN_SECRET
                    ),
                })
            })
    }

    /// The MAC of a value's `body` stored under `key` (16 bytes).
    fn value_mac<'py>(&self, py: Python<'py>, key: &[u8], body: &[u8]) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.value_mac(key, body))
    }

    /// Whether `mac` is the MAC of `body` under `key` for any secret.
    fn value_ok(&self, key: &[u8], body: &[u8], mac: &[u8]) -> bool {
        self.0.value_ok(key, body, mac)
    }

    /// The mark that lets `key` hold a counter, with `written` (8 bytes).
    fn counter_mac<'py>(&self, py: Python<'py>, key: &[u8], written: &[u8]) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.counter_mac(key, written))
    }

    /// Whether `mac` is the counter mark of `key` and `written` for any secret.
    fn counter_ok(&self, key: &[u8], written: &[u8], mac: &[u8]) -> bool {
        self.0.counter_ok(key, written, mac)
    }

    /// The MAC of an event's signed fields (`cluster_signed_body`).
    fn event_mac<'py>(&self, py: Python<'py>, body: &[u8]) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.event_mac(body))
    }

    /// Whether `mac` is the MAC of an event's signed fields for any secret.
    fn event_ok(&self, body: &[u8], mac: &[u8]) -> bool {
        self.0.event_ok(body, mac)
    }
}

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
fn entry_fields<'py>(
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

fn slices<'a>(owned: &'a [(Bound<'_, PyBytes>, Bound<'_, PyBytes>)]) -> Vec<(&'a [u8], &'a [u8])> {
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
    let keys = match e.about {
        zc::About::Key(k) => PyTuple::new(py, [PyBytes::new(py, &k)])?,
        zc::About::Tags(t) => PyTuple::new(py, t)?,
    };
    Ok(Some(PyTuple::new(
        py,
        [
            e.seq.into_pyobject(py)?.into_any(),
            e.host.into_pyobject(py)?.into_any(),
            e.op.into_pyobject(py)?.into_any(),
            keys.into_any(),
            e.gen.into_pyobject(py)?.into_any(),
            e.w.into_pyobject(py)?.into_any(),
        ],
    )?))
}

/// The segment key of a host's note about a key (`b"k" + key`) or a tag
/// (`b"t" + tag`).
///
/// >>> cluster_note_key(b"kuser:1")[:9]
/// b'\x00zg-note:'
#[pyfunction]
pub fn cluster_note_key<'py>(py: Python<'py>, what: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &zc::note_key(what))
}

/// Adds the class, functions and constants to `_native`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    macro_rules! add {
        ($($f:ident),*) => { $(m.add_function(wrap_pyfunction!($f, m)?)?;)* };
    }
    add!(
        cluster_encode,
        cluster_counter_head,
        cluster_decode,
        cluster_body_start,
        cluster_signed_body,
        cluster_tags_field,
        cluster_follow,
        cluster_place,
        cluster_parse,
        cluster_note_key
    );
    m.add_class::<ClusterSigner>()?;
    m.add("CLUSTER_READ", zc::READ)?;
    m.add("CLUSTER_WRITE", zc::WRITE)?;
    m.add("CLUSTER_RELEASE", zc::RELEASE)?;
    m.add("CLUSTER_MAC_LEN", zc::MAC_LEN)?;
    m.add("CLUSTER_MIN_SECRET", zc::MIN_SECRET)?;
    m.add("CLUSTER_MAX_AGE_US", zc::MAX_AGE_US)?;
    m.add("CLUSTER_MAX_SKEW_US", zc::MAX_SKEW_US)?;
    m.add("CLUSTER_ALL", zc::ALL)?;
    Ok(())
}
