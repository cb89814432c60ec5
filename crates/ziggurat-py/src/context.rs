//! The loader context (`ziggurat.load_context`): a loader called from here runs with a
//! fresh `LoadContext` in the `CURRENT` context variable, and what it said of its result
//! (a TTL, tags, or not to store it) is read back once it returns, for the Cache's
//! `Miss::override_with`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use ziggurat_cache::Took;

use crate::args::refuse_awaitable;

/// `LoadContext` and `CURRENT` of `ziggurat.load_context`, imported once.
static PARTS: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn parts(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
    PARTS.get_or_try_init(py, || {
        let m = py.import("ziggurat.load_context")?;
        Ok((
            m.getattr("LoadContext")?.unbind(),
            m.getattr("CURRENT")?.unbind(),
        ))
    })
}

/// What a loader said of its result.
pub(crate) enum Said {
    /// Nothing: the call's plan stands.
    Nothing,
    /// Return the value without storing it.
    Skip,
    /// Store it for this TTL and/or with these tags.
    Override(Option<f64>, Option<Vec<Vec<u8>>>),
}

/// What the context `ctx` (None: the loader ran without one) holds once its loader returned.
pub(crate) fn said(ctx: Option<&Bound<'_, PyAny>>) -> PyResult<Said> {
    let Some(ctx) = ctx else {
        return Ok(Said::Nothing);
    };
    if !ctx.getattr("said")?.is_truthy()? {
        return Ok(Said::Nothing);
    }
    if ctx.getattr("skipped")?.is_truthy()? {
        return Ok(Said::Skip);
    }
    let ttl: Option<f64> = ctx.getattr("ttl")?.extract()?;
    let tags: Option<Vec<String>> = ctx.getattr("tags")?.extract()?;
    let tags = tags.map(|t| t.into_iter().map(String::into_bytes).collect());
    Ok(Said::Override(ttl, tags))
}

/// Calls a sync loader inside a fresh load context, timed: its value or its error (an
/// awaitable refused: see `refuse_awaitable`), the time it took, and the context.
pub(crate) fn call_loader<'py>(
    loader: &Bound<'py, PyAny>,
) -> PyResult<(PyResult<Bound<'py, PyAny>>, Took, Bound<'py, PyAny>)> {
    let py = loader.py();
    let (class, var) = parts(py)?;
    let ctx = class.bind(py).call0()?;
    let token = var.bind(py).call_method1("set", (&ctx,))?;
    let t0 = ziggurat_core::ticks();
    let r = loader.call0().and_then(refuse_awaitable);
    let took = Took::Ticks(ziggurat_core::ticks().saturating_sub(t0));
    var.bind(py).call_method1("reset", (token,))?;
    Ok((r, took, ctx))
}
