//! The cluster tier's rules (ziggurat-cluster) for `ziggurat.cluster`: the
//! signer, the bodies, the events and the scripts. Python keeps the tier's I/O,
//! its serializer and its words; each function here converts and calls the crate.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyTuple};
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
    Ok(Some(event_tuple(py, e)?))
}

/// An event as `(seq, host, op, keys, gen, w)`; `keys` the key, or the tags.
fn event_tuple(py: Python<'_>, e: zc::Event) -> PyResult<Bound<'_, PyTuple>> {
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

/// The segment key of a host's note about a key (`b"k" + key`) or a tag
/// (`b"t" + tag`).
///
/// >>> cluster_note_key(b"kuser:1")[:9]
/// b'\x00zg-note:'
#[pyfunction]
pub fn cluster_note_key<'py>(py: Python<'py>, what: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &zc::note_key(what))
}

/// Where a stream reader starts as it (re)connects, from the host's position
/// (`positioned`, `seq`, `gen`) and the server's sequence and generation:
/// `("resume", None, None)`, `("take_generation", gen, None)`,
/// `("adopt_end", None, None)` or `("clear_and_adopt_end", None, reason)`.
///
/// >>> cluster_start(False, 0, 0, 9, 1), cluster_start(True, 9, 1, 12, 1)
/// (('adopt_end', None, None), ('resume', None, None))
#[pyfunction]
pub fn cluster_start(
    positioned: bool,
    seq: u64,
    gen: u64,
    server_seq: u64,
    server_gen: u64,
) -> (&'static str, Option<u64>, Option<String>) {
    match zc::start(positioned, seq, gen, server_seq, server_gen) {
        zc::Start::Resume => ("resume", None, None),
        zc::Start::TakeGeneration(g) => ("take_generation", Some(g), None),
        zc::Start::AdoptEnd => ("adopt_end", None, None),
        zc::Start::ClearAndAdoptEnd(c) => ("clear_and_adopt_end", None, Some(c.reason())),
    }
}

/// The stream reader's rule for the entries of the host `me` (its id in
/// events): see `entry`.
#[pyclass(frozen, module = "ziggurat._native")]
pub struct ClusterFollower(zc::Follower);

#[pymethods]
impl ClusterFollower {
    #[new]
    fn new(me: &str) -> Self {
        ClusterFollower(zc::Follower::new(me))
    }

    /// Whether an entry's fields name this host.
    fn own(&self, fields: &Bound<'_, PyDict>) -> bool {
        let owned = entry_fields(fields);
        self.0.own(&slices(&owned))
    }

    /// What the reader does with an entry read after `last` in generation
    /// `gen` (0: not known yet): `(seq, clears, generation, event, lag_sample)`:
    /// its number (None: refused, a bad signature), the reasons to clear the
    /// host first (in order), the generation followed from now on (None: the
    /// same), another host's event to apply as `cluster_parse` gives it (or
    /// None), and whether its age is a sample of the invalidation lag.
    ///
    /// >>> f = ClusterFollower("a1")
    /// >>> f.entry({b"s": b"8", b"h": b"a1", b"g": b"3"}, 7, 3, ClusterSigner("c", [b"0123456789abcdef"]))
    /// (8, [], None, None, False)
    fn entry<'py>(
        &self,
        py: Python<'py>,
        fields: &Bound<'py, PyDict>,
        last: u64,
        gen: u64,
        signer: &ClusterSigner,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let owned = entry_fields(fields);
        let e = self.0.entry(&slices(&owned), last, gen, &signer.0);
        let clears: Vec<String> = e.clears.iter().map(zc::Clear::reason).collect();
        let event = match e.apply {
            Some(ev) => Some(event_tuple(py, ev)?),
            None => None,
        };
        PyTuple::new(
            py,
            [
                e.seq.into_pyobject(py)?.into_any(),
                clears.into_pyobject(py)?.into_any(),
                e.generation.into_pyobject(py)?.into_any(),
                event.into_pyobject(py)?.into_any(),
                PyBool::new(py, e.lag_sample).to_owned().into_any(),
            ],
        )
    }
}

/// The time of a write made now (`now_us`, µs since the epoch) after the
/// latest write time the host gave or saw, `latest`: `(w, ignored)`, where
/// `ignored` says `latest` was too far ahead of the clock and was dropped.
///
/// >>> cluster_next_write_time(1000, 5000), cluster_next_write_time(1000, 10**12)
/// ((5001, False), (1000, True))
#[pyfunction]
pub fn cluster_next_write_time(now_us: u64, latest: u64) -> (u64, bool) {
    match zc::next_write_time(now_us, latest) {
        Ok(w) => (w, false),
        Err(w) => (w, true),
    }
}

/// Whether a write time `w` learnt from elsewhere is within the allowed skew
/// of the wall clock `now_us`.
///
/// >>> cluster_believable(1000, 1000), cluster_believable(10**12, 1000)
/// (True, False)
#[pyfunction]
pub fn cluster_believable(w: u64, now_us: u64) -> bool {
    zc::believable(w, now_us)
}

/// `w`, cut to the allowed skew ahead of the wall clock `now_us`.
///
/// >>> cluster_bounded(10**12, 1000) < 10**12
/// True
#[pyfunction]
pub fn cluster_bounded(w: u64, now_us: u64) -> u64 {
    zc::bounded(w, now_us)
}

/// Whether a body written at `written` with `tags` is not older than the
/// latest clear (`cleared`), its key's note and its tags' notes (`tag_notes`,
/// one per tag, 0: none).
///
/// >>> cluster_fresh(60, 10, 20, ("a",), [50]), cluster_fresh(40, 10, 20, ("a",), [50])
/// (True, False)
#[pyfunction]
pub fn cluster_fresh(
    written: u64,
    cleared: u64,
    key_note: u64,
    tags: Vec<String>,
    tag_notes: Vec<u64>,
) -> bool {
    let mut notes = tag_notes.into_iter();
    zc::fresh(written, cleared, key_note, &tags, |_| {
        notes.next().unwrap_or(0)
    })
}

fn lease(holder: u64, beat_ms: u64, follower: u64, follower_at_ms: u64, now_ms: u64) -> zc::Lease {
    zc::Lease {
        holder,
        beat_ms,
        follower,
        follower_at_ms,
        now_ms,
    }
}

/// What process `me` (a dedicated reader when `dedicated`) does about the
/// host's stream-reader lease, from its words and the monotonic clock (ms):
/// `"hold"`, `"hand_back"`, `"wait"`, `"ask"` or `"claim"`.
///
/// >>> import os
/// >>> cluster_take(os.getpid(), False, 0, 0, 0, 0, 10_000)
/// 'claim'
#[pyfunction]
pub fn cluster_take(
    me: u64,
    dedicated: bool,
    holder: u64,
    beat_ms: u64,
    follower: u64,
    follower_at_ms: u64,
    now_ms: u64,
) -> &'static str {
    let l = lease(holder, beat_ms, follower, follower_at_ms, now_ms);
    match zc::take(me, dedicated, &l) {
        zc::Take::Hold => "hold",
        zc::Take::HandBack => "hand_back",
        zc::Take::Wait => "wait",
        zc::Take::Ask => "ask",
        zc::Take::Claim => "claim",
    }
}

/// Whether worker `me` stands aside for a dedicated reader (see `cluster_take`).
///
/// >>> import os
/// >>> cluster_standing_aside(os.getpid(), False, 0, 0, 0, 0, 10_000)
/// False
#[pyfunction]
pub fn cluster_standing_aside(
    me: u64,
    dedicated: bool,
    holder: u64,
    beat_ms: u64,
    follower: u64,
    follower_at_ms: u64,
    now_ms: u64,
) -> bool {
    let l = lease(holder, beat_ms, follower, follower_at_ms, now_ms);
    zc::standing_aside(me, dedicated, &l)
}

/// `url` with its passwords hidden (its user information's, any `password=`
/// query parameter's), for messages and logs. Never raises.
///
/// >>> cluster_redacted("redis://app:hunter2@10.0.0.5:6379/0")
/// 'redis://app:***@10.0.0.5:6379/0'
#[pyfunction]
pub fn cluster_redacted(url: &str) -> String {
    zc::redacted(url)
}

/// `text` with every password of `url` replaced by `***`, as written in the
/// URL and decoded.
///
/// >>> cluster_scrubbed("AUTH hunter2 refused", "redis://:hunter2@h/0")
/// 'AUTH *** refused'
#[pyfunction]
pub fn cluster_scrubbed(text: &str, url: &str) -> String {
    zc::scrubbed(text, url)
}

/// The first six arguments of a write (op, `host:fence`, the stream's length,
/// the event's `k`, its MAC, its write time), as bytes.
///
/// >>> s = ClusterSigner("c", [b"0123456789abcdef"])
/// >>> cluster_write_args(s, "1f", 3, 1000, "del", b"k", 7)[:3]
/// [b'del', b'1f:3', b'1000']
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn cluster_write_args<'py>(
    py: Python<'py>,
    signer: &ClusterSigner,
    host: &str,
    fence: u64,
    stream_length: u64,
    op: &str,
    k: &[u8],
    w: u64,
) -> Vec<Bound<'py, PyBytes>> {
    zc::write_args(&signer.0, host, fence, stream_length, op, k, w)
        .iter()
        .map(|a| PyBytes::new(py, a))
        .collect()
}

/// Milliseconds Redis keeps a signed value written now for `ttl` seconds (0:
/// no expiry).
///
/// >>> cluster_px_value(60.0), cluster_px_value(float("inf"))
/// (60000, 86400000)
#[pyfunction]
pub fn cluster_px_value(ttl: f64) -> u64 {
    zc::px_value(ttl)
}

/// Milliseconds Redis keeps a value written at `written_us` that gets `ttl`
/// from `now_us` on.
///
/// >>> cluster_px_since(60.0, 10**15, 10**15)
/// 60000
#[pyfunction]
pub fn cluster_px_since(ttl: f64, written_us: u64, now_us: u64) -> u64 {
    zc::px_since(ttl, written_us, now_us)
}

/// What the write script's error `message` says: `"fenced"`, `"missing"`,
/// `"not_int"`, `"overflow"` or `"server"` (anything else).
///
/// >>> cluster_refusal("ERR user_script:12: FENCED"), cluster_refusal("OOM")
/// ('fenced', 'server')
#[pyfunction]
pub fn cluster_refusal(message: &str) -> &'static str {
    match zc::refusal(message) {
        zc::Refusal::Fenced => "fenced",
        zc::Refusal::Missing => "missing",
        zc::Refusal::NotInt => "not_int",
        zc::Refusal::Overflow => "overflow",
        zc::Refusal::Server => "server",
    }
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
        cluster_note_key,
        cluster_start,
        cluster_next_write_time,
        cluster_believable,
        cluster_bounded,
        cluster_fresh,
        cluster_take,
        cluster_standing_aside,
        cluster_redacted,
        cluster_scrubbed,
        cluster_write_args,
        cluster_px_value,
        cluster_px_since,
        cluster_refusal
    );
    m.add_class::<ClusterSigner>()?;
    m.add_class::<ClusterFollower>()?;
    m.add("CLUSTER_READ", zc::READ)?;
    m.add("CLUSTER_WRITE", zc::WRITE)?;
    m.add("CLUSTER_RELEASE", zc::RELEASE)?;
    m.add("CLUSTER_MAC_LEN", zc::MAC_LEN)?;
    m.add("CLUSTER_MIN_SECRET", zc::MIN_SECRET)?;
    m.add("CLUSTER_MAX_AGE_US", zc::MAX_AGE_US)?;
    m.add("CLUSTER_MAX_SKEW_US", zc::MAX_SKEW_US)?;
    m.add("CLUSTER_ALL", zc::ALL)?;
    m.add("CLUSTER_STALE_MS", zc::STALE_MS)?;
    m.add("CLUSTER_SCHEMES", PyTuple::new(m.py(), zc::SCHEMES)?)?;
    m.add("CLUSTER_CHECK_MS", zc::CHECK_MS)?;
    let words = PyDict::new(m.py());
    for (name, i) in zc::words::ALL_WORDS {
        words.set_item(name, i)?;
    }
    m.add("CLUSTER_WORDS", words)?;
    Ok(())
}
