//! `open_pair`: a cache's two segments opened as one (see `ziggurat_cache::open_pair`).

use std::path::PathBuf;

use pyo3::prelude::*;
use ziggurat_cache::pair_options;

use crate::convert::{err, size_arg};
use crate::segment::{policy_dict, PySegment};

/// Opens (or creates) the segments `name` (entries) and `name.neg` (cached
/// misses and load leases) as one: when this call made the first and the
/// second fails, the first is removed again. `size=None` is the default
/// budget fitted to the directory's free space (with `notice` saying so);
/// `neg_size=None` is a sixteenth of the entries' budget, at least 1 MiB.
/// Returns `(main, neg, notice)`.
///
/// >>> import tempfile, shutil; d = tempfile.mkdtemp(dir="/dev/shm")
/// >>> main, neg, notice = open_pair("doc-pair", "8MiB", None, directory=d)
/// >>> main.size, neg.size, notice
/// (8388608, 1048576, None)
/// >>> main.close(); neg.close(); shutil.rmtree(d)
#[pyfunction]
#[pyo3(signature = (name, size, neg_size, *, directory = "/dev/shm", recreate = false, avg_item_size = 256, lock_timeout = 0.5, group = None, huge_pages = "auto"))]
#[allow(clippy::too_many_arguments)]
pub fn open_pair(
    py: Python<'_>,
    name: &str,
    size: Option<&Bound<'_, PyAny>>,
    neg_size: Option<&Bound<'_, PyAny>>,
    directory: &str,
    recreate: bool,
    avg_item_size: i128,
    lock_timeout: f64,
    group: Option<u32>,
    huge_pages: &str,
) -> PyResult<(PySegment, PySegment, Option<String>)> {
    let dir = PathBuf::from(directory);
    let opts = pair_options(
        dir,
        recreate,
        avg_item_size,
        lock_timeout,
        group,
        huge_pages,
    );
    let opts = opts.map_err(err)?;
    let size = size.filter(|s| !s.is_none()).map(size_arg).transpose()?;
    let neg_size = neg_size.filter(|s| !s.is_none());
    let neg_size = neg_size.map(size_arg).transpose()?;
    let owned = name.to_string();
    let pair = py
        .detach(move || ziggurat_cache::open_pair(&owned, size, neg_size, &opts))
        .map_err(err)?;
    let neg_name = format!("{name}{}", ziggurat_cache::NEG_SUFFIX);
    Ok((
        PySegment::opened(pair.main, name.to_string(), pair.requested.0),
        PySegment::opened(pair.neg, neg_name, pair.requested.1),
        pair.notice,
    ))
}

/// What the file system of `directory` and the kernel offer a segment there
/// in huge pages: `{"file_system", "mount" (the tmpfs huge= option), "kernel"
/// (the shmem policy), "offered", "remedy" (how to get them, or None)}`.
///
/// >>> huge_page_policy("/dev/shm")["file_system"]
/// 'tmpfs'
#[pyfunction]
pub fn huge_page_policy<'py>(
    py: Python<'py>,
    directory: &str,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let dir = std::path::Path::new(directory);
    policy_dict(py, ziggurat_cache::HugePolicy::of(dir))
}

/// The message of the error `Cache(..., degraded="raise")` raises when the
/// segment cannot be used (the rule every front end shares).
///
/// >>> degraded_refusal("Cache('blog')", "no room")
/// "Cache('blog'): the shared segment cannot be used: no room"
#[pyfunction]
pub fn degraded_refusal(call: &str, reason: &str) -> String {
    ziggurat_cache::degraded_refusal(call, reason)
}

/// The warning of a cache that runs without its segment; `local_ttl` is None
/// for "passthrough", else the "local" mode's `degraded_ttl` in seconds (the
/// rule every front end shares, in Python's words).
///
/// >>> degraded_warning("'blog'", "no room", None).endswith("and the process restarts")
/// True
#[pyfunction]
#[pyo3(signature = (name, reason, local_ttl))]
pub fn degraded_warning(name: &str, reason: &str, local_ttl: Option<f64>) -> String {
    ziggurat_cache::degraded_warning(name, reason, local_ttl, &crate::convert::PyWords)
}
