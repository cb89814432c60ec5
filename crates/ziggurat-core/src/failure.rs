//! Contained panics: an operation of a handle that panics (data no check
//! foresaw, or an engine bug) is stopped inside the engine, the handle is
//! marked failed, and from then on it answers every operation with an error
//! instead of touching its file again.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, OpenCause, Result};
use crate::invalid::remove_mark;
use crate::segment::Segment;

impl Segment {
    /// Why this handle stopped using its file, if it did: an operation met
    /// data it could not handle (a file damaged in a way no check foresaw, or
    /// an engine bug) and stopped, and the handle then answers every read
    /// with a miss and every write with [`Error::Open`] of cause
    /// [`OpenCause::Damaged`]. A front end treats the cache as degraded.
    ///
    /// ```no_run
    /// # let seg: ziggurat_core::Segment = unimplemented!();
    /// if let Some(why) = seg.failure() {
    ///     eprintln!("{}: {why}", seg.path().display());
    /// }
    /// ```
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Runs the operation `what`, containing a panic: no panic leaves the
    /// engine (a front end would see it as its process dying, or as an error
    /// outside its contract). The first marks the handle failed (see
    /// [`Segment::failure`]); a failed handle runs nothing more. No write is
    /// left half done in the file: the shard lock's guard ends the write's
    /// intent as a repair would, and unlocks, as the panic unwinds.
    #[inline]
    pub(crate) fn contain<R>(&self, what: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
        if let Some(why) = self.failure.get() {
            return Err(self.failed_error(what, why));
        }
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r,
            Err(payload) => Err(self.failed_error(what, self.fail(payload))),
        }
    }

    /// Records the first contained panic; returns the recorded reason.
    #[cold]
    pub(crate) fn fail(&self, payload: Box<dyn Any + Send>) -> &str {
        self.failure.get_or_init(|| panic_message(payload))
    }

    #[cold]
    fn failed_error(&self, what: &str, why: &str) -> Error {
        Error::open(
            OpenCause::Damaged,
            format!(
                "segment file {} cannot be used: {what} stopped on data it could not handle \
                 ({why}), and this handle no longer reads or writes the file. Remove the \
                 file once no process uses it ({}): the next open makes a new one",
                self.path.display(),
                remove_mark(true)
            ),
        )
    }
}

/// What a contained panic said, for the error that reports it.
pub(crate) fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p
            .downcast_ref::<&str>()
            .map_or_else(|| "a panic".to_owned(), |s| (*s).to_owned()),
    }
}
