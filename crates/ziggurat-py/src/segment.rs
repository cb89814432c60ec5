//! `ziggurat.Segment`: the L2 tier alone, with str/bytes keys and bytes
//! values; its rules are `ziggurat_cache::Handle`'s, converted here.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use ziggurat_cache::{Handle, HugePolicy, OpenArgs, Payload, WriteOp};
#[cfg(feature = "failpoints")]
use ziggurat_core::failpoint;
use ziggurat_core::Segment;

use crate::args::key_bytes;
use crate::convert::{err, fields_dict, size_arg, tags_arg, ttl_arg, value_bytes};

/// A shared-memory segment, attached by name. See the package documentation.
#[pyclass(name = "Segment", module = "ziggurat._native", frozen)]
pub struct PySegment {
    pub(crate) handle: Handle,
}

impl PySegment {
    /// A handle on a segment opened elsewhere (a cache's pair), which the
    /// options of that open would have made `requested_size` bytes.
    pub(crate) fn opened(inner: Segment, name: String, requested_size: u64) -> Self {
        PySegment {
            handle: Handle::opened(inner, name, requested_size),
        }
    }

    /// The segment the handle shares (with a cache made from it).
    pub(crate) fn inner(&self) -> &Arc<Segment> {
        self.handle.inner()
    }

    /// Converts and checks a write's arguments (all before anything is written),
    /// then writes by `op`.
    fn write(
        &self,
        op: WriteOp,
        key: &Bound<'_, PyAny>,
        expected: Option<&Bound<'_, PyAny>>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.handle.segment().map_err(err)?;
        let k = key_bytes(key)?;
        let e = expected.map(value_bytes).transpose()?.unwrap_or_default();
        let v = value_bytes(value)?;
        let (ttl, tags) = (ttl_arg(ttl)?, tags_arg(tags)?);
        self.handle.write(op, k, e, v, ttl, &tags).map_err(err)
    }
}

/// Values read into new bytes objects (None: no memory for one).
struct NewBytes<'py>(Python<'py>);

impl<'py> Payload for NewBytes<'py> {
    type Out = PyResult<Bound<'py, PyBytes>>;

    fn copied(&mut self, bytes: &[u8]) -> Self::Out {
        Ok(PyBytes::new(self.0, bytes))
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Self::Out {
        PyBytes::new_with(self.0, len, |buf| {
            write(buf);
            Ok(())
        })
    }
}

/// The str of a tag argument.
fn tag_str<'a>(tag: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    let Ok(t) = tag.cast::<PyString>() else {
        return Err(PyTypeError::new_err("tag must be a str"));
    };
    Ok(t.to_str()?.as_bytes())
}

/// `HugePolicy`'s fields as a dict (`huge_pages`, `huge_page_policy`).
pub(crate) fn policy_dict<'py>(py: Python<'py>, p: HugePolicy) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("file_system", p.file_system)?;
    d.set_item("mount", p.mount)?;
    d.set_item("kernel", p.kernel)?;
    d.set_item("offered", p.offered)?;
    d.set_item("remedy", p.remedy)?;
    Ok(d)
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
        let args = OpenArgs {
            size: size.filter(|s| !s.is_none()).map(size_arg).transpose()?,
            directory: PathBuf::from(directory),
            recreate,
            avg_item_size,
            shards,
            lock_timeout,
            group,
            read_only,
            huge_pages: huge_pages.to_string(),
        };
        let name = name.to_string();
        let handle = py.detach(move || Handle::open(&name, &args)).map_err(err)?;
        Ok(PySegment { handle })
    }

    /// The file size the constructor's arguments would have created; not
    /// `size` when the file was made earlier with other parameters, which the
    /// open keeps (see `recreate`).
    #[getter]
    fn requested_size(&self) -> u64 {
        self.handle.requested_size()
    }

    /// The segment's name.
    #[getter]
    fn name(&self) -> &str {
        self.handle.name()
    }

    /// Path of the segment file.
    #[getter]
    fn path(&self) -> String {
        self.inner().path().display().to_string()
    }

    /// Size of the segment file in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.inner().geometry().file_size()
    }

    /// Longest key accepted, in bytes.
    #[getter]
    fn max_key_size(&self) -> u32 {
        self.inner().geometry().max_key()
    }

    /// Longest value accepted, in bytes.
    #[getter]
    fn max_value_size(&self) -> u32 {
        self.inner().geometry().max_value()
    }

    /// Whether this handle was attached with `read_only=True`.
    #[getter]
    fn read_only(&self) -> bool {
        self.inner().is_read_only()
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
        self.inner().directory_notice()
    }

    /// The gid the file is shared with (mode 660), the `group=` a read-write
    /// open of it needs; None for a private file. Read from the attached file.
    ///
    /// >>> s = Segment("doc-group", "2MiB"); s.shared_group is None  # made without group=
    /// True
    /// >>> s.unlink()
    #[getter]
    fn shared_group(&self) -> PyResult<Option<u32>> {
        self.inner().shared_group().map_err(err)
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
        self.inner().file_id().map_err(err)
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
        self.inner().failure().map(str::to_owned)
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
        let seg = &self.handle;
        let r = py.detach(|| seg.huge_pages()).map_err(err)?;
        let d = policy_dict(py, r.policy)?;
        d.set_item("mode", r.mode)?;
        d.set_item("backed", r.backed)?;
        d.set_item("backed_bytes", r.backed_bytes)?;
        d.set_item("eligible_bytes", r.eligible_bytes)?;
        Ok(d)
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.handle.closed()
    }

    /// The value of `key` as bytes, or None.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let got = self.handle.get(key_bytes(key)?, &mut NewBytes(py));
        got.map_err(err)?.transpose()
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
        self.write(WriteOp::Set, key, None, value, ttl, tags)?;
        Ok(())
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
        self.write(WriteOp::Add, key, None, value, ttl, tags)
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
        self.write(WriteOp::ReplaceIf, key, Some(expected), value, ttl, tags)
    }

    /// Removes `key`; returns whether it was present.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let seg = self.handle.segment().map_err(err)?;
        seg.delete(key_bytes(key)?).map_err(err)
    }

    /// Makes every entry carrying `tag` a miss in every process.
    fn invalidate_tag(&self, tag: &Bound<'_, PyAny>) -> PyResult<()> {
        let seg = self.handle.segment().map_err(err)?;
        seg.invalidate_tag(tag_str(tag)?).map_err(err)
    }

    /// Removes every entry.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let seg = self.handle.segment().map_err(err)?;
        py.detach(|| seg.clear()).map_err(err)
    }

    /// Word `i` of the words kept for the layers above the engine (the
    /// cluster tier's reader election, stream position and counters); zero in
    /// a new file. Read-only attaches read them too.
    fn app_load(&self, i: usize) -> PyResult<u64> {
        self.handle.app_load(i).map_err(err)
    }

    /// The version stamp of `key` (even when no write is in progress).
    fn stamp(&self, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        self.handle.stamp(key_bytes(key)?).map_err(err)
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
        let (h, k) = (&self.handle, key_bytes(key)?);
        py.detach(|| h.wait(k, stamp, timeout)).map_err(err)
    }

    /// Host-wide counters and sizes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        fields_dict(py, &self.handle.segment().map_err(err)?.stats())
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
        let found = self.handle.inspect(key_bytes(key)?, &mut NewBytes(py));
        let Some(r) = found.map_err(err)? else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("value", r.value?)?;
        d.set_item("expiry_ms", r.expiry_ms)?;
        d.set_item("now_ms", r.now_ms)?;
        d.set_item("tags", r.tags)?;
        d.set_item("record_bytes", r.record_bytes)?;
        Ok(Some(d))
    }

    /// The tag cell of `tag` and its current version: `(cell, version)`.
    fn tag_version(&self, tag: &Bound<'_, PyAny>) -> PyResult<(u32, u32)> {
        self.handle.tag_version(tag_str(tag)?).map_err(err)
    }

    /// The load-lease cells of the header (docs/format.md), read without
    /// touching them: a list of `(pid, releases)` per cell, `pid` the holder's
    /// (0 when free or lapsed), `releases` the cell's release counter (wraps at
    /// 2**32). Needs a `read_only=True` handle, since looking at a lease through
    /// a writable one would take it.
    fn leases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.handle.leases().map_err(err)?)
    }

    /// Checks every shard (taking each lock briefly); with `repair`, fixes what
    /// it finds. Returns {"ok", "problems", "repaired", "entries"}.
    #[pyo3(signature = (repair = true))]
    fn verify<'py>(&self, py: Python<'py>, repair: bool) -> PyResult<Bound<'py, PyDict>> {
        let seg = self.handle.segment().map_err(err)?;
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
        self.handle.close();
    }

    /// Removes the segment file. Processes already attached keep their mapping.
    fn unlink(&self) -> PyResult<()> {
        self.inner().unlink().map_err(err)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _a: &Bound<'_, PyAny>, _b: &Bound<'_, PyAny>, _c: &Bound<'_, PyAny>) {
        self.close();
    }

    fn __repr__(&self) -> String {
        format!("<ziggurat.Segment {}>", self.handle.describe())
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
                None => {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "unknown crash point {p:?}"
                    )))
                }
            },
        }
        Ok(())
    }
}
