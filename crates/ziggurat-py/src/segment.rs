//! `ziggurat.Segment`: the L2 tier alone, with str/bytes keys and bytes values.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
#[cfg(feature = "failpoints")]
use ziggurat_core::failpoint;
use ziggurat_core::{Options, Segment};

use crate::args::key_bytes;
use crate::convert::{err, size_arg, tags_arg, ttl_arg, value_bytes, SegmentError};

/// A shared-memory segment, attached by name. See the package documentation.
#[pyclass(name = "Segment", module = "ziggurat._native", frozen)]
pub struct PySegment {
    pub(crate) inner: Arc<Segment>,
    name: String,
    closed: AtomicBool,
    /// The file size the arguments of this open would have created: differs
    /// from the file's when it was made with other parameters.
    requested_size: u64,
}

type WriteOp =
    fn(&Segment, &[u8], &[u8], &[u8], Option<f64>, &[&[u8]]) -> ziggurat_core::Result<bool>;

impl PySegment {
    /// A handle on a segment opened elsewhere (a cache's pair), which the
    /// options of that open would have made `requested_size` bytes.
    pub(crate) fn opened(inner: Segment, name: String, requested_size: u64) -> Self {
        PySegment {
            inner: Arc::new(inner),
            name,
            closed: AtomicBool::new(false),
            requested_size,
        }
    }

    /// Converts and checks a write's arguments (all before anything is written),
    /// then runs `op`.
    fn write(
        &self,
        key: &Bound<'_, PyAny>,
        expected: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        op: WriteOp,
    ) -> PyResult<bool> {
        let seg = self.seg()?;
        let k = key_bytes(key)?;
        let e = match expected {
            Some(e) => value_bytes(e)?,
            None => &[][..],
        };
        let v = value_bytes(value)?;
        let ttl = ttl_arg(ttl)?;
        let tags = tags_arg(tags)?;
        let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
        op(seg, k, e, v, ttl, &tag_refs).map_err(err)
    }

    #[inline]
    pub(crate) fn seg(&self) -> PyResult<&Arc<Segment>> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(SegmentError::new_err("the segment is closed"));
        }
        Ok(&self.inner)
    }
}

/// Reads `key` into a new bytes object through the core's lock-free read
/// (retried when a writer moves the entry mid-copy, then a miss).
pub(crate) fn read_bytes<'py>(
    py: Python<'py>,
    seg: &Segment,
    key: &[u8],
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let read = seg
        .read_with(key, |n, fill| {
            PyBytes::new_with(py, n, |buf| {
                fill(buf);
                Ok(())
            })
        })
        .map_err(err)?;
    read.map(|(b, _)| b).transpose()
}

fn check_key_len(seg: &Segment, key: &[u8]) -> PyResult<()> {
    seg.check_key(key).map_err(err)
}

#[pymethods]
impl PySegment {
    #[new]
    #[pyo3(signature = (name, size = None, *, directory = "/dev/shm", recreate = false, avg_item_size = 128, shards = None, lock_timeout = 0.5, group = None, read_only = false, huge_pages = "auto"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        name: &str,
        size: Option<&Bound<'_, PyAny>>,
        directory: &str,
        recreate: bool,
        avg_item_size: i128,
        shards: Option<i128>,
        lock_timeout: f64,
        group: Option<u32>,
        read_only: bool,
        huge_pages: &str,
    ) -> PyResult<Self> {
        let huge_pages = ziggurat_core::HugePages::parse(huge_pages).map_err(err)?;
        let size = match size {
            Some(s) if !s.is_none() => size_arg(s)?,
            _ => 64 << 20,
        };
        let opts = Options {
            size,
            directory: PathBuf::from(directory),
            recreate,
            group,
            read_only,
            huge_pages,
            ..Options::default()
        }
        .sized(avg_item_size, shards, lock_timeout)
        .map_err(err)?;
        let (avg_item_size, shards) = (opts.avg_item_size, opts.shards);
        let requested_size = ziggurat_core::Geometry::compute(size, avg_item_size, shards)
            .map_or(0, |g| g.file_size());
        let name_owned = name.to_string();
        let seg = py
            .detach(move || Segment::open(&name_owned, &opts))
            .map_err(err)?;
        Ok(PySegment {
            inner: Arc::new(seg),
            name: name.to_string(),
            closed: AtomicBool::new(false),
            requested_size,
        })
    }

    /// The file size the constructor's arguments would have created; not
    /// `size` when the file was made earlier with other parameters, which the
    /// open keeps (see `recreate`).
    #[getter]
    fn requested_size(&self) -> u64 {
        self.requested_size
    }

    /// The segment's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Path of the segment file.
    #[getter]
    fn path(&self) -> String {
        self.inner.path().display().to_string()
    }

    /// Size of the segment file in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.geometry().file_size()
    }

    /// Longest key accepted, in bytes.
    #[getter]
    fn max_key_size(&self) -> u32 {
        self.inner.geometry().max_key()
    }

    /// Longest value accepted, in bytes.
    #[getter]
    fn max_value_size(&self) -> u32 {
        self.inner.geometry().max_value()
    }

    /// Whether this handle was attached with `read_only=True`.
    #[getter]
    fn read_only(&self) -> bool {
        self.inner.is_read_only()
    }

    /// A warning when the segment's directory lets any local user rename,
    /// replace or remove its files (writable by every user, no sticky bit),
    /// else None. `Cache` logs it once per directory.
    ///
    /// >>> s = Segment("doc-notice", "2MiB"); s.directory_notice is None  # /dev/shm: sticky
    /// True
    /// >>> s.unlink()
    #[getter]
    fn directory_notice(&self) -> Option<&str> {
        self.inner.directory_notice()
    }

    /// The gid the file is shared with (mode 660), the `group=` a read-write
    /// open of it needs; None for a private file. Read from the attached file.
    ///
    /// >>> s = Segment("doc-group", "2MiB"); s.shared_group is None  # made without group=
    /// True
    /// >>> s.unlink()
    #[getter]
    fn shared_group(&self) -> PyResult<Option<u32>> {
        self.inner.shared_group().map_err(err)
    }

    /// `(device, inode)` of the attached file: two handles with the same
    /// `file_id` map the same file, whatever the path refers to now.
    ///
    /// >>> a = Segment("doc-id", "2MiB"); b = Segment("doc-id", read_only=True)
    /// >>> a.file_id == b.file_id
    /// True
    /// >>> a.unlink()
    #[getter]
    fn file_id(&self) -> PyResult<(u64, u64)> {
        self.inner.file_id().map_err(err)
    }

    /// Why this handle stopped using its file, or None: an operation met data
    /// it could not handle (a damaged file), and from then on reads miss and
    /// writes raise `SegmentError` with cause "damaged".
    ///
    /// >>> import tempfile; d = tempfile.mkdtemp()
    /// >>> Segment("doc-failure", 1 << 20, directory=d).failure is None
    /// True
    #[getter]
    fn failure(&self) -> Option<String> {
        self.inner.failure().map(str::to_owned)
    }

    /// Whether huge pages back this segment's mapping in this process:
    /// `{"mode": "auto" | "require" | "off", "backed": bool, "backed_bytes":
    /// bytes mapped with huge pages, "eligible_bytes": bytes of the file in
    /// whole 2 MiB pages, "file_system": "tmpfs"..., "mount": the tmpfs huge= option,
    /// "kernel": the kernel's shmem policy, "offered": whether the directory
    /// offers them, "remedy": how to get them, or None}`. Touches one word of
    /// each 2 MiB page of the mapping, then reads /proc/self/smaps.
    ///
    /// >>> s = Segment("doc-huge", "4MiB"); r = s.huge_pages()
    /// >>> r["mode"], r["backed"] == (r["backed_bytes"] > 0)
    /// ('auto', True)
    /// >>> s.unlink()
    fn huge_pages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let seg = self.seg()?;
        let r = py.detach(|| seg.huge_pages());
        let dir = seg
            .path()
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        let d = PyDict::new(py);
        d.set_item("mode", r.mode.name())?;
        d.set_item("backed", r.backed())?;
        d.set_item("backed_bytes", r.backed_bytes)?;
        d.set_item("eligible_bytes", r.eligible_bytes)?;
        d.set_item("file_system", &r.policy.fs_type)?;
        d.set_item("mount", &r.policy.mount)?;
        d.set_item("kernel", &r.policy.kernel)?;
        d.set_item("offered", r.policy.offers())?;
        d.set_item("remedy", r.policy.remedy(&dir))?;
        Ok(d)
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// The value of `key` as bytes, or None.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let seg = self.seg()?;
        let k = key_bytes(key)?;
        check_key_len(seg, k)?;
        read_bytes(py, seg, k)
    }

    /// Stores `value` under `key`, evicting as needed.
    #[pyo3(signature = (key, value, *, ttl = None, tags = None))]
    fn set(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.write(key, None, value, ttl, tags, |seg, k, _, v, t, tg| {
            seg.set(k, v, t, tg).map(|_| true)
        })
        .map(|_| ())
    }

    /// Stores `value` only if `key` has no live entry; returns whether it did.
    #[pyo3(signature = (key, value, *, ttl = None, tags = None))]
    fn add(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.write(key, None, value, ttl, tags, |seg, k, _, v, t, tg| {
            seg.add(k, v, t, tg)
        })
    }

    /// Stores `value` only if `key`'s live value equals `expected` (an atomic
    /// compare-and-set under the shard lock); returns whether it did.
    #[pyo3(signature = (key, expected, value, *, ttl = None, tags = None))]
    fn replace_if(
        &self,
        key: &Bound<'_, PyAny>,
        expected: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.write(
            key,
            Some(expected),
            value,
            ttl,
            tags,
            |seg, k, e, v, t, tg| seg.replace_if(k, e, v, t, tg),
        )
    }

    /// Removes `key`; returns whether it was present.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let seg = self.seg()?;
        let k = key_bytes(key)?;
        seg.delete(k).map_err(err)
    }

    /// Makes every entry carrying `tag` a miss in every process.
    fn invalidate_tag(&self, tag: &Bound<'_, PyAny>) -> PyResult<()> {
        let seg = self.seg()?;
        let Ok(t) = tag.cast::<pyo3::types::PyString>() else {
            return Err(PyTypeError::new_err("tag must be a str"));
        };
        seg.invalidate_tag(t.to_str()?.as_bytes()).map_err(err)
    }

    /// Removes every entry.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let seg = self.seg()?;
        py.detach(|| seg.clear()).map_err(err)
    }

    /// Word `i` of the words kept for the layers above the engine (the
    /// cluster tier's reader election, stream position and counters); zero in
    /// a new file. Read-only attaches read them too.
    fn app_load(&self, i: usize) -> PyResult<u64> {
        self.seg()?.app_load(i).ok_or_else(|| {
            PyValueError::new_err(format!("Segment.app_load(): word {i} does not exist"))
        })
    }

    /// The version stamp of `key` (even when no write is in progress).
    fn stamp(&self, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        let seg = self.seg()?;
        let k = key_bytes(key)?;
        check_key_len(seg, k)?;
        Ok(seg.stamp_word(&seg.hash(k)).load())
    }

    /// Sleeps (without the GIL) until `key`'s stamp differs from `stamp` or
    /// `timeout` seconds pass; returns whether it changed.
    fn wait(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        stamp: i128,
        timeout: f64,
    ) -> PyResult<bool> {
        let seg = self.seg()?;
        let k = key_bytes(key)?;
        check_key_len(seg, k)?;
        let Ok(stamp) = u32::try_from(stamp) else {
            return Err(PyValueError::new_err(format!(
                "stamp must be in 0..2**32, got {stamp}"
            )));
        };
        if !(timeout.is_finite() && timeout >= 0.0) {
            return Err(PyValueError::new_err(
                "timeout must be a finite number of seconds >= 0",
            ));
        }
        let t = Duration::from_secs_f64(timeout.min(86400.0));
        py.detach(|| seg.wait(k, stamp, t)).map_err(err)
    }

    /// Host-wide counters and sizes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let seg = self.seg()?;
        let d = PyDict::new(py);
        for (k, v) in seg.stats() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The live record of `key` as stored, with what the segment knows of it:
    /// `{"value": bytes, "expiry_ms": deadline or 0, "now_ms": the clock the
    /// deadline is on, "tags": [(cell, version, current version)],
    /// "record_bytes": bytes of the record in its ring}`, or None when the key
    /// has no live record. Counts nothing and changes nothing on a read-only handle.
    fn inspect<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let seg = self.seg()?;
        let k = key_bytes(key)?;
        check_key_len(seg, k)?;
        let read = seg
            .read_with(k, |n, fill| {
                PyBytes::new_with(py, n, |buf| {
                    fill(buf);
                    Ok(())
                })
            })
            .map_err(err)?;
        let Some((value, meta)) = read else {
            return Ok(None);
        };
        let value = value?;
        let ntags = seg.geometry().ntags();
        let tags = PyList::empty(py);
        for &w in &meta.tags[..meta.ntags as usize] {
            let r = ziggurat_core::TagRef::unpack(w);
            // A recorded cell outside the table never matches (docs/format.md).
            let current = (r.cell < ntags).then(|| seg.tag_word(r.cell).load());
            tags.append((r.cell, r.version, current))?;
        }
        let len = value.as_bytes().len();
        let record =
            8 + if meta.expiry != 0 { 8 } else { 0 } + 8 * meta.ntags as usize + k.len() + len;
        let d = PyDict::new(py);
        d.set_item("value", value)?;
        d.set_item("expiry_ms", meta.expiry)?;
        d.set_item("now_ms", ziggurat_core::now_ms())?;
        d.set_item("tags", tags)?;
        d.set_item("record_bytes", record.div_ceil(8) * 8)?;
        Ok(Some(d))
    }

    /// The tag cell of `tag` and its current version: `(cell, version)`.
    fn tag_version(&self, tag: &Bound<'_, PyAny>) -> PyResult<(u32, u32)> {
        let seg = self.seg()?;
        let Ok(t) = tag.cast::<pyo3::types::PyString>() else {
            return Err(PyTypeError::new_err("tag must be a str"));
        };
        let cell = seg.tag_cell(t.to_str()?.as_bytes());
        Ok((cell, seg.tag_word(cell).load()))
    }

    /// The load-lease cells of the header (docs/format.md), read without
    /// touching them: a list of `(pid, releases)` per cell, `pid` the holder's
    /// (0 when free or lapsed), `releases` the cell's release counter (wraps at
    /// 2**32). Needs a `read_only=True` handle, since looking at a lease through
    /// a writable one would take it.
    fn leases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let seg = self.seg()?;
        if !seg.is_read_only() {
            return Err(PyValueError::new_err(
                "Segment.leases() reads the lease cells without taking them, which only a \
                 read_only=True handle does: open the segment with read_only=True",
            ));
        }
        PyList::new(py, seg.lease_cells().unwrap_or_default())
    }

    /// Checks every shard (taking each lock briefly); with `repair`, fixes what
    /// it finds. Returns {"ok", "problems", "repaired", "entries"}.
    #[pyo3(signature = (repair = true))]
    fn verify<'py>(&self, py: Python<'py>, repair: bool) -> PyResult<Bound<'py, PyDict>> {
        let seg = self.seg()?;
        let rep = py.detach(|| seg.verify(repair)).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("ok", rep.problems.is_empty())?;
        d.set_item("problems", PyList::new(py, &rep.problems)?)?;
        d.set_item("repaired", rep.repaired)?;
        d.set_item("entries", rep.entries)?;
        Ok(d)
    }

    /// Detaches this handle; later calls raise SegmentError. The data stays for
    /// the other processes.
    fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.inner.flush_counts();
        }
    }

    /// Removes the segment file. Processes already attached keep their mapping.
    fn unlink(&self) -> PyResult<()> {
        self.inner.unlink().map_err(err)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _a: &Bound<'_, PyAny>, _b: &Bound<'_, PyAny>, _c: &Bound<'_, PyAny>) {
        self.close();
    }

    fn __repr__(&self) -> String {
        format!(
            "<ziggurat.Segment {:?} at {}>",
            self.name,
            self.inner.path().display()
        )
    }
}

#[cfg(feature = "failpoints")]
#[pymethods]
impl PySegment {
    /// Test hook: the next write in this process that reaches `point`
    /// ("locked", "appended", "stamp_odd", "published", "evict") kills the
    /// process with SIGKILL while it holds the shard lock; "panic" makes it
    /// panic there instead, which the segment contains. None disarms.
    #[pyo3(signature = (point))]
    fn _crash_at(&self, point: Option<&str>) -> PyResult<()> {
        match point {
            None => failpoint::arm(None),
            Some(p) => match failpoint::Point::parse(p) {
                Some(pt) => failpoint::arm(Some(pt)),
                None => return Err(PyValueError::new_err(format!("unknown crash point {p:?}"))),
            },
        }
        Ok(())
    }
}
