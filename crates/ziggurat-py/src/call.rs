//! Calls of a serializer with one argument (`loads(data)`, `dumps(value)`),
//! the calls every L2 read and every write of a value not encoded natively
//! makes.
//!
//! A build for one interpreter calls through vectorcall, as PyO3 does. The
//! wheel is built for CPython's stable ABI of 3.10, which lists
//! `PyObject_Vectorcall` only from 3.12 on, so PyO3 calls through an argument
//! tuple there: about 250 instructions a call (the tuple's allocation and
//! release), 15% of an L2 read past the decode. CPython exports the function
//! from 3.11 on with the same signature, so that build looks it up in the
//! running interpreter once and calls it when present; on 3.10, or in an
//! embedding that does not export it, it keeps PyO3's call.

#![cfg_attr(feature = "abi3", allow(unsafe_code))] // the looked-up function and its call

use pyo3::prelude::*;

/// `f(arg)`: in the wheel's build, by the interpreter's `PyObject_Vectorcall`
/// when it exports one.
#[inline]
pub(crate) fn call_one(
    py: Python<'_>,
    f: &Py<PyAny>,
    arg: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    #[cfg(feature = "abi3")]
    if let Some(vectorcall) = vectorcall() {
        // The slot before the argument is scratch space the callee may use
        // (PY_VECTORCALL_ARGUMENTS_OFFSET), as CPython's own callers provide.
        let mut args = [std::ptr::null_mut(), arg.as_ptr()];
        // SAFETY: the function is CPython's `PyObject_Vectorcall` (looked up by
        // name, whose signature has not changed since 3.9); the GIL is held
        // (`py`); `f` and `arg` are live for the call; `args` holds one
        // argument after the scratch slot the offset flag offers; a null
        // result has set the error that `from_owned_ptr_or_err` takes.
        return unsafe {
            let out = vectorcall(
                f.as_ptr(),
                args.as_mut_ptr().add(1),
                1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                std::ptr::null_mut(),
            );
            Bound::from_owned_ptr_or_err(py, out).map(Bound::unbind)
        };
    }
    f.call1(py, (arg,))
}

/// `PyObject_Vectorcall`'s type (CPython's `Include/abstract.h`).
#[cfg(feature = "abi3")]
type Vectorcall = unsafe extern "C" fn(
    *mut pyo3::ffi::PyObject,
    *const *mut pyo3::ffi::PyObject,
    usize,
    *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject;

/// The flag saying that `args[-1]` may be overwritten by the callee.
#[cfg(feature = "abi3")]
const PY_VECTORCALL_ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);

/// The running interpreter's `PyObject_Vectorcall`, looked up once.
#[cfg(feature = "abi3")]
fn vectorcall() -> Option<Vectorcall> {
    static FOUND: std::sync::OnceLock<Option<Vectorcall>> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: `dlsym` with RTLD_DEFAULT and a NUL-terminated name only
        // searches the loaded objects; a non-null answer is the address of
        // the exported function of that name, whose type is `Vectorcall`.
        unsafe {
            let p = libc::dlsym(libc::RTLD_DEFAULT, c"PyObject_Vectorcall".as_ptr());
            (!p.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, Vectorcall>(p))
        }
    })
}
