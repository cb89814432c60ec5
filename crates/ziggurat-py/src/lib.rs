//! The `ziggurat._native` extension: a PyO3 layer over ziggurat-core (the
//! segment) and ziggurat-cache (the rules of the entries a cache reads and
//! writes: trailer, reads below L1, cached misses, leases, counters). What
//! touches Python objects lives here: argument conversion and error mapping,
//! the serializers, `l1` (the per-process tier that holds live objects) and
//! the fetch steps that call the loader.

use pyo3::prelude::*;

mod args;
mod below;
mod call;
mod cluster;
mod codec;
mod context;
mod convert;
mod core;
mod fetch;
mod http;
mod l1;
mod pair;
mod quick;
mod read;
mod rules;
mod segment;
mod store;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ZigguratError", py.get_type::<convert::ZigguratError>())?;
    m.add("SegmentError", py.get_type::<convert::SegmentError>())?;
    m.add("LockTimeout", py.get_type::<convert::LockTimeout>())?;
    m.add_class::<segment::PySegment>()?;
    m.add_class::<core::CacheCore>()?;
    m.add_class::<codec::AutoCodec>()?;
    m.add("MutationError", py.get_type::<convert::MutationError>())?;
    m.add("LoadTimeout", py.get_type::<convert::LoadTimeout>())?;
    m.add_class::<fetch::Step>()?;
    m.add_class::<read::Peek>()?;
    for k in ziggurat_cache::StepKind::ALL {
        m.add(format!("STEP_{}", k.name()), k as u8)?;
    }
    for k in ziggurat_cache::Sight::ALL {
        m.add(format!("FOUND_{}", k.name()), k as u8)?;
    }
    m.add_function(wrap_pyfunction!(rules::parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(rules::check_ttl, m)?)?;
    m.add_function(wrap_pyfunction!(rules::incr_overflow, m)?)?;
    m.add_function(wrap_pyfunction!(rules::check_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(rules::segment_name, m)?)?;
    m.add_function(wrap_pyfunction!(rules::name_and_version, m)?)?;
    m.add_function(wrap_pyfunction!(rules::check_segment_name, m)?)?;
    m.add_function(wrap_pyfunction!(rules::namespace_parts, m)?)?;
    m.add_function(wrap_pyfunction!(rules::metric_families, m)?)?;
    m.add_function(wrap_pyfunction!(rules::rules, m)?)?;
    m.add_function(wrap_pyfunction!(pair::open_pair, m)?)?;
    m.add_function(wrap_pyfunction!(pair::huge_page_policy, m)?)?;
    m.add_function(wrap_pyfunction!(pair::degraded_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(pair::degraded_warning, m)?)?;
    m.add_function(wrap_pyfunction!(rules::check_key, m)?)?;
    m.add_function(wrap_pyfunction!(quick::install_quick, m)?)?;
    m.add("MAX_KEY", ziggurat_core::MAX_KEY)?;
    m.add("LAYOUT_VERSION", ziggurat_core::LAYOUT_VERSION)?;
    m.add("MAX_TAGS", ziggurat_core::MAX_TAGS)?;
    // The limits Python's argument checks read, so that each rule has one home.
    m.add("MAX_TTL", ziggurat_cache::MAX_TTL_SECONDS)?;
    m.add("MAX_SIZE", ziggurat_cache::MAX_SIZE)?;
    m.add("MAX_NAME", ziggurat_cache::MAX_NAME)?;
    m.add("MAX_VERSION", ziggurat_cache::MAX_VERSION)?;
    http::register(m)?;
    cluster::register(m)?;
    // How this extension was optimized ("pgo": the profile-guided build of
    // bench/pgo.py; "release" otherwise), so that a benchmark says what it measured.
    m.add("BUILD", option_env!("ZIGGURAT_BUILD").unwrap_or("release"))?;
    Ok(())
}
