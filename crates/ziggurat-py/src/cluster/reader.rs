//! What a host's stream reader decides: where it starts, what it does with
//! each entry, which process reads (`ziggurat.cluster.reader`).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyTuple};
use ziggurat_cluster as zc;

use super::events::{entry_fields, event_tuple, slices};
use super::signer::ClusterSigner;

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
