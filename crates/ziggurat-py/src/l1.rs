//! This process's L1 as the binding keeps it: `ziggurat_cache`'s table of
//! entries holding Python objects, keys compared as Python compares them, the
//! whole behind a re-entry guard that the GIL orders.

use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use pyo3::types::PyString;

/// An L1 entry of Python objects.
pub type Entry = ziggurat_cache::Entry<Py<PyAny>, Py<PyAny>>;
/// The table of this process's L1.
pub type L1 = ziggurat_cache::L1<Py<PyAny>, Py<PyAny>>;

// The hit path's fields end within the first cache line (see the table).
const _: () = assert!(Entry::fits_one_line());
// Entries cross threads inside the pyclass, which is `Send + Sync`.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Entry>()
};

/// Whether an entry's key is `key`: identity first, then str contents, then `==`.
#[inline(always)]
pub fn is_key<'a>(key: &'a Bound<'_, PyAny>) -> impl Fn(&Py<PyAny>) -> bool + 'a {
    move |b| same_key(key, b)
}

#[inline(always)]
fn same_key(a: &Bound<'_, PyAny>, b: &Py<PyAny>) -> bool {
    if a.as_ptr() == b.as_ptr() {
        return true;
    }
    let b = b.bind(a.py());
    if let (Ok(x), Ok(y)) = (a.cast::<PyString>(), b.cast::<PyString>()) {
        return match (x.to_str(), y.to_str()) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        };
    }
    a.eq(b).unwrap_or(false)
}

/// The L1 behind a re-entry guard. Every caller holds the GIL, so only one
/// thread is ever inside at a time, except when code inside runs Python (a key's
/// `__eq__`, an object's finalizer), which may switch threads or re-enter this
/// cache: such a caller finds the guard set and bypasses L1 for that call.
/// Nothing ever waits for it, so no thread can hold the GIL while waiting on a
/// thread that waits for the GIL.
pub struct Shared {
    busy: std::sync::atomic::AtomicBool,
    l1: std::cell::UnsafeCell<L1>,
}

// SAFETY: `l1` is only reached through `try_with`, which requires the GIL and
// hands out the `&mut` to at most one caller at a time (the `busy` flag); the
// `L1` itself is `Send` (so `Shared` is `Send` without help).
#[allow(unsafe_code)]
unsafe impl Sync for Shared {}

impl Shared {
    pub fn new(l1: L1) -> Shared {
        Shared {
            busy: std::sync::atomic::AtomicBool::new(false),
            l1: std::cell::UnsafeCell::new(l1),
        }
    }

    /// Runs `f` on the L1 unless another caller is inside; `None` then.
    #[inline(always)]
    #[allow(unsafe_code)] // the cell access below; the binding's only other is `Sync`
    pub fn try_with<R>(&self, _gil: Python<'_>, f: impl FnOnce(&mut L1) -> R) -> Option<R> {
        // The GIL orders every access: a plain load and store suffice, no
        // locked instruction (this is on the path of every L1 hit).
        if self.busy.load(Ordering::Relaxed) {
            return None;
        }
        self.busy.store(true, Ordering::Relaxed);
        struct Release<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        let _release = Release(&self.busy);
        // SAFETY: the caller holds the GIL (the token), and the flag was clear:
        // no other caller is inside until `_release` drops.
        Some(f(unsafe { &mut *self.l1.get() }))
    }
}
