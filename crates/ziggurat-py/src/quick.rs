//! The entry points of `Cache.get`, `Cache.fetch` and `Cache.incr` that Python calls: an
//! L1 hit answered without PyO3's argument parser and trampoline, the other
//! plain calls handed to the method's body through PyO3's trampoline but
//! without its parser.
//!
//! An L1 hit is the cache's most frequent call and its cheapest work (a table
//! probe and a few atomic loads). PyO3's generic entry (the trampoline that
//! counts the thread's attachment and catches panics, then a parser that fills
//! an argument array from positional and keyword arguments) was a fifth of a
//! hit's cost (docs/benchmarks.md). These entries take the hit straight from
//! the vectorcall arguments when the call is `get(key)`, `get(key, default)` or
//! `fetch(key, loader)` with an exact `str` or `bytes` key. The same calls
//! that miss go to the bodies the PyO3 methods call
//! (`CacheCore::get_value`, `CacheCore::fetch_value`) through PyO3's own
//! trampoline, which counts the attachment and turns a panic into an
//! exception: the parser and a second trip through the method's descriptor
//! would cost a fetch miss more, and `Python::attach` from a foreign entry
//! (which takes CPython's thread-state lock API) more than the trampoline. The trampoline is PyO3's macro support, outside its
//! semver promise, hence the exact version pin in Cargo.toml. Calls with
//! keywords go to the PyO3 method. Every behaviour of `get` and `fetch` still
//! lives in `CacheCore`: this file only decides how a call reaches it.
//!
//! The hit path here drops no Python reference (a drop outside PyO3's
//! trampoline would be deferred) and runs no Python code.

#![allow(unsafe_code)] // an extern "C" entry point and raw vectorcall arguments

use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::impl_::trampoline::{fastcall_cfunction_with_keywords as trampoline, MethodDef};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::core::{CacheCore, Quick};
use crate::fetch::FetchArgs;

/// A native method with a quick entry: its method table entry (CPython keeps
/// a pointer to it in every descriptor made from it, so it is static)
/// and the full method as found on the class (a method descriptor, called
/// with the core as its first argument; the class lives as long as the
/// module, so one reference serves every core).
struct Method {
    def: ffi::PyMethodDef,
    name: &'static CStr,
    full: OnceLock<Py<PyAny>>,
}

// SAFETY: `def` is never written after it is built, and its pointers are to
// static strings and a function: sharing it between threads reads only.
unsafe impl Sync for Method {}

impl Method {
    /// The entry `entry` of the method `name`; `doc` starts with its text
    /// signature, as CPython reads it.
    const fn new(
        name: &'static CStr,
        entry: ffi::PyCFunctionFastWithKeywords,
        doc: &'static CStr,
    ) -> Method {
        Method {
            def: ffi::PyMethodDef {
                ml_name: name.as_ptr(),
                ml_meth: ffi::PyMethodDefPointer {
                    PyCFunctionFastWithKeywords: entry,
                },
                ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
                ml_doc: doc.as_ptr(),
            },
            name,
            full: OnceLock::new(),
        }
    }

    fn name(&self) -> &'static str {
        self.name.to_str().unwrap_or_default()
    }
}

static GET: Method = Method::new(
    c"get",
    get,
    c"get($self, key, default=None)\n--\n\nThe cached value of key, or default.",
);

static INCR: Method = Method::new(
    c"incr",
    incr,
    c"incr($self, key, delta=None, *, default=None, tags=None)\n--\n\n\
      Adds delta to the counter under key, for every process of the host.",
);

static FETCH: Method = Method::new(
    c"fetch",
    fetch,
    c"fetch($self, key, loader, *, ttl=None, tags=None, neg_ttl=None, stale_ttl=None)\n--\n\n\
      The cached value of key, or what loader() returns, stored.",
);

/// Puts the quick entries named in `names` (of `get`, `fetch`, `incr`) on
/// `cls`, a Python subclass of the native class, as method descriptors, so
/// that `cache.get(key)` on
/// an instance of `cls` calls the entry with no Python frame and nothing bound
/// per instance. Each class gets descriptors of its own: CPython's
/// specialized call of a method descriptor checks the instance's exact type.
#[pyfunction]
pub(crate) fn install_quick(cls: &Bound<'_, PyType>, names: Vec<String>) -> PyResult<()> {
    let py = cls.py();
    if !cls.is_subclass_of::<CacheCore>()? {
        return Err(PyTypeError::new_err(format!(
            "install_quick(): {} is not a subclass of the native Cache",
            cls.name()?
        )));
    }
    for m in [&GET, &FETCH, &INCR] {
        if !names.iter().any(|n| n == m.name()) {
            continue;
        }
        if m.full.get().is_none() {
            let full = py.get_type::<CacheCore>().getattr(m.name())?.unbind();
            let _ = m.full.set(full);
        }
        // SAFETY: `m.def` is static and describes an entry below with the
        // flags its signature needs; `cls` is a live type object. A null
        // return has set an error.
        let descr = unsafe {
            let d = ffi::PyDescr_NewMethod(
                cls.as_type_ptr(),
                &m.def as *const ffi::PyMethodDef as *mut ffi::PyMethodDef,
            );
            Bound::from_owned_ptr_or_err(py, d)?
        };
        cls.setattr(m.name(), descr)?;
    }
    Ok(())
}

/// `incr`'s vectorcall entry: `incr(key)` and `incr(key, delta)`, the
/// counter calls of every request, go to the body without PyO3's parser.
unsafe extern "C" fn incr(
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: as for `get`.
    unsafe {
        if !kwnames.is_null() || !(nargs == 1 || nargs == 2) {
            return call_full(&INCR, core, args, nargs, kwnames);
        }
        trampoline::<IncrBody>(core, args, nargs, kwnames)
    }
}

/// `get`'s vectorcall entry (`METH_FASTCALL | METH_KEYWORDS`): a cached miss
/// answers the caller's default.
unsafe extern "C" fn get(
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls this with the GIL held, `core` being an instance
    // of the class `install_quick` made the descriptor for (the descriptor
    // checks it), `args` holding `nargs` positional arguments followed by one
    // per name in `kwnames`.
    unsafe {
        if !kwnames.is_null() || !(nargs == 1 || nargs == 2) {
            return call_full(&GET, core, args, nargs, kwnames);
        }
        let key = *args;
        let default = if nargs == 2 {
            *args.add(1)
        } else {
            ffi::Py_None()
        };
        if let Hit::Answer(out) = hit(core, key, default, false) {
            return out;
        }
        trampoline::<GetBody>(core, args, nargs, kwnames)
    }
}

/// `fetch`'s vectorcall entry: a hit needs neither the loader nor the
/// options, and a cached miss answers None.
unsafe extern "C" fn fetch(
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: as for `get`.
    unsafe {
        if !kwnames.is_null() || nargs != 2 {
            return call_full(&FETCH, core, args, nargs, kwnames);
        }
        let key = *args;
        match hit(core, key, ffi::Py_None(), true) {
            Hit::Answer(out) => out,
            Hit::Absent => trampoline::<FetchAbsentBody>(core, args, nargs, kwnames),
            Hit::Other => trampoline::<FetchBody>(core, args, nargs, kwnames),
        }
    }
}

/// `get`'s body as PyO3's trampoline runs it (`get_body`).
struct GetBody;

impl MethodDef<trampoline::Func> for GetBody {
    const METH: trampoline::Func = get_body;
}

/// `incr`'s body as PyO3's trampoline runs it (`incr_body`).
struct IncrBody;

impl MethodDef<trampoline::Func> for IncrBody {
    const METH: trampoline::Func = incr_body;
}

/// `fetch`'s body as PyO3's trampoline runs it (`fetch_body`).
struct FetchBody;

impl MethodDef<trampoline::Func> for FetchBody {
    const METH: trampoline::Func = fetch_body;
}

/// `fetch`'s body for a key L1 has no entry for (`fetch_absent_body`).
struct FetchAbsentBody;

impl MethodDef<trampoline::Func> for FetchAbsentBody {
    const METH: trampoline::Func = fetch_absent_body;
}

/// `CacheCore::get_value` for `get(key)` or `get(key, default)`.
///
/// # Safety
/// As for `get`, which checked the arguments' count (1 or 2, no keywords);
/// attached through the trampoline.
unsafe fn get_body(
    py: Python<'_>,
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    _kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: per this function's contract.
    unsafe {
        let c = Borrowed::from_ptr(py, core).cast_unchecked::<CacheCore>();
        let key = Borrowed::from_ptr(py, *args);
        let default =
            (nargs == 2).then(|| Borrowed::from_ptr(py, *args.add(1)).to_owned().unbind());
        c.get().get_value(py, &key, default).map(Py::into_ptr)
    }
}

/// `CacheCore::incr` (the PyO3 method's own body) for `incr(key)` or
/// `incr(key, delta)`.
///
/// # Safety
/// As for `incr`, which checked the arguments' count (1 or 2, no keywords);
/// attached through the trampoline.
unsafe fn incr_body(
    py: Python<'_>,
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    _kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: per this function's contract.
    unsafe {
        let c = Borrowed::from_ptr(py, core).cast_unchecked::<CacheCore>();
        let key = Borrowed::from_ptr(py, *args);
        let delta = (nargs == 2).then(|| Borrowed::from_ptr(py, *args.add(1)));
        let n = c.get().incr(py, &key, delta.as_deref(), None, None)?;
        Ok(n.into_pyobject(py)?.into_ptr())
    }
}

/// `CacheCore::fetch_value` for `fetch(key, loader)`.
///
/// # Safety
/// As for `fetch`, which checked the arguments (two, no keywords); attached
/// through the trampoline.
unsafe fn fetch_body(
    py: Python<'_>,
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    _nargs: ffi::Py_ssize_t,
    _kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: per this function's contract.
    unsafe { fetch_with(py, core, args, false) }
}

/// `fetch_body` when the quick entry found no L1 entry for the key: the
/// body goes below L1 without probing it again.
///
/// # Safety
/// As for `fetch_body`.
unsafe fn fetch_absent_body(
    py: Python<'_>,
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    _nargs: ffi::Py_ssize_t,
    _kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: per this function's contract.
    unsafe { fetch_with(py, core, args, true) }
}

/// `CacheCore::fetch_value` for `fetch(key, loader)`; `l1_absent`: L1 was
/// just seen to hold no entry for the key.
///
/// # Safety
/// As for `fetch_body`.
#[inline(always)]
unsafe fn fetch_with(
    py: Python<'_>,
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    l1_absent: bool,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: per this function's contract.
    unsafe {
        let c = Borrowed::from_ptr(py, core).cast_unchecked::<CacheCore>();
        let key = Borrowed::from_ptr(py, *args);
        let loader = Borrowed::from_ptr(py, *args.add(1));
        c.get()
            .fetch_value(py, &key, &loader, FetchArgs::default(), l1_absent)
            .map(Py::into_ptr)
    }
}

/// The full method called with the same arguments, by vectorcall where the
/// ABI has it (a build for one CPython version).
///
/// # Safety
/// As for `get`; `m` is the method the entry stands for.
#[cfg(not(feature = "abi3"))]
unsafe fn call_full(
    m: &Method,
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let Some(full) = m.full.get() else {
        return std::ptr::null_mut(); // unreachable: set before the function exists
    };
    // SAFETY: per this function's contract; the new argument vector borrows
    // the same objects for the duration of the call.
    unsafe {
        let nkw = if kwnames.is_null() {
            0
        } else {
            ffi::PyTuple_Size(kwnames)
        };
        let total = (nargs + nkw) as usize;
        let mut stack: [*mut ffi::PyObject; 4] = [core; 4];
        let mut heap = Vec::new();
        let with_self: *mut *mut ffi::PyObject = if total < stack.len() {
            stack.as_mut_ptr()
        } else {
            heap.resize(total + 1, core);
            heap.as_mut_ptr()
        };
        std::ptr::copy_nonoverlapping(args, with_self.add(1), total);
        ffi::PyObject_Vectorcall(full.as_ptr(), with_self, nargs as usize + 1, kwnames)
    }
}

/// The full method called with the same arguments, through calls of the
/// stable ABI of CPython 3.10 (the wheel's): positional arguments on the
/// stack, or a tuple and a dict for calls with keywords.
///
/// # Safety
/// As for `get`; `m` is the method the entry stands for.
#[cfg(feature = "abi3")]
unsafe fn call_full(
    m: &Method,
    core: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let Some(full) = m.full.get() else {
        return std::ptr::null_mut(); // unreachable: set before the function exists
    };
    let full = full.as_ptr();
    let end = std::ptr::null_mut::<ffi::PyObject>();
    // SAFETY: per this function's contract; `PyTuple_SetItem` steals the
    // reference taken just before it, and every new object is released on
    // every path.
    unsafe {
        if kwnames.is_null() && nargs == 1 {
            return ffi::PyObject_CallFunctionObjArgs(full, core, *args, end);
        }
        if kwnames.is_null() && nargs == 2 {
            return ffi::PyObject_CallFunctionObjArgs(full, core, *args, *args.add(1), end);
        }
        let pos = ffi::PyTuple_New(nargs + 1);
        if pos.is_null() {
            return pos;
        }
        ffi::Py_IncRef(core);
        ffi::PyTuple_SetItem(pos, 0, core);
        for i in 0..nargs {
            let a = *args.offset(i);
            ffi::Py_IncRef(a);
            ffi::PyTuple_SetItem(pos, i + 1, a);
        }
        let mut kw = std::ptr::null_mut();
        if !kwnames.is_null() {
            kw = ffi::PyDict_New();
            if kw.is_null() {
                ffi::Py_DecRef(pos);
                return kw;
            }
            for j in 0..ffi::PyTuple_Size(kwnames) {
                let name = ffi::PyTuple_GetItem(kwnames, j);
                if ffi::PyDict_SetItem(kw, name, *args.offset(nargs + j)) < 0 {
                    ffi::Py_DecRef(pos);
                    ffi::Py_DecRef(kw);
                    return std::ptr::null_mut();
                }
            }
        }
        let out = ffi::PyObject_Call(full, pos, kw);
        ffi::Py_DecRef(pos);
        if !kw.is_null() {
            ffi::Py_DecRef(kw);
        }
        out
    }
}

/// What the quick entry's L1 lookup leaves the call with.
enum Hit {
    /// A new reference to the answer.
    Answer(*mut ffi::PyObject),
    /// L1 has no entry for the key.
    Absent,
    /// Anything else, which the method's body takes from the start.
    Other,
}

/// The answer when L1 holds a valid entry for `key`; whether it holds none
/// at all; else `Other`, which the method's body then takes. For `fetch`
/// (`for_fetch`), not when hits may start an early refresh: the body decides
/// that.
///
/// # Safety
/// The GIL is held; `core` is a `CacheCore`, `key` and `default` are live
/// objects borrowed for the call.
unsafe fn hit(
    core: *mut ffi::PyObject,
    key: *mut ffi::PyObject,
    default: *mut ffi::PyObject,
    for_fetch: bool,
) -> Hit {
    // SAFETY: per this function's contract. Exact str and bytes hash without
    // running Python code and never fail.
    unsafe {
        let py = Python::assume_attached();
        let core = Borrowed::from_ptr(py, core).cast_unchecked::<CacheCore>();
        let c = core.get();
        if !c.quick_hits() || (for_fetch && c.refresh_ahead != 0.0) {
            return Hit::Other;
        }
        if ffi::PyUnicode_CheckExact(key) == 0 && ffi::PyBytes_CheckExact(key) == 0 {
            return Hit::Other;
        }
        let h = ffi::PyObject_Hash(key);
        if h == -1 {
            ffi::PyErr_Clear();
            return Hit::Other;
        }
        let key = Borrowed::from_ptr(py, key);
        // A panic must not unwind into CPython; it cannot happen on this path,
        // but if it did the method's body would report it properly.
        let found = catch_unwind(AssertUnwindSafe(|| c.l1_peek(py, &key, h as u64)));
        match found {
            Ok(Quick::Value(v)) => Hit::Answer(v.into_ptr()),
            Ok(Quick::Negative) => {
                ffi::Py_IncRef(default);
                Hit::Answer(default)
            }
            Ok(Quick::Absent) => Hit::Absent,
            Ok(Quick::Miss) | Err(_) => Hit::Other,
        }
    }
}
