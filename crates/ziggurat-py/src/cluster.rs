//! The cluster tier's rules (ziggurat-cluster) for `ziggurat.cluster`: the
//! signer, the bodies, the events, the reader's decisions, the write times and
//! what a write sends, and the connection (its calls release the GIL). Python
//! keeps its serializer and the stream reader's loop; each function here
//! converts and calls the crate. One file per part.

mod bodies;
mod events;
mod link;
mod reader;
mod signer;
mod times;
mod writes;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use ziggurat_cluster as zc;

use bodies::*;
use events::*;
use link::{ClusterDown, ClusterLink, ClusterReply};
use reader::*;
use signer::ClusterSigner;
use times::*;
use writes::*;

/// Adds the class, functions and constants to `_native`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    macro_rules! add {
        ($($f:ident),*) => { $(m.add_function(wrap_pyfunction!($f, m)?)?;)* };
    }
    add!(
        cluster_encode,
        cluster_counter_head,
        cluster_decode,
        cluster_body_start,
        cluster_signed_body,
        cluster_tags_field,
        cluster_follow,
        cluster_place,
        cluster_parse,
        cluster_note_key,
        cluster_start,
        cluster_next_write_time,
        cluster_believable,
        cluster_bounded,
        cluster_fresh,
        cluster_take,
        cluster_standing_aside,
        cluster_redacted,
        cluster_scrubbed,
        cluster_write_args,
        cluster_px_value,
        cluster_px_since,
        cluster_refusal
    );
    m.add_class::<ClusterSigner>()?;
    m.add_class::<ClusterFollower>()?;
    m.add_class::<ClusterLink>()?;
    m.add("ClusterDown", m.py().get_type::<ClusterDown>())?;
    m.add("ClusterReply", m.py().get_type::<ClusterReply>())?;
    m.add("CLUSTER_READ", zc::READ)?;
    m.add("CLUSTER_WRITE", zc::WRITE)?;
    m.add("CLUSTER_RELEASE", zc::RELEASE)?;
    m.add("CLUSTER_MAC_LEN", zc::MAC_LEN)?;
    m.add("CLUSTER_MIN_SECRET", zc::MIN_SECRET)?;
    m.add("CLUSTER_MAX_AGE_US", zc::MAX_AGE_US)?;
    m.add("CLUSTER_MAX_SKEW_US", zc::MAX_SKEW_US)?;
    m.add("CLUSTER_ALL", zc::ALL)?;
    m.add("CLUSTER_STALE_MS", zc::STALE_MS)?;
    m.add("CLUSTER_SCHEMES", PyTuple::new(m.py(), zc::SCHEMES)?)?;
    m.add("CLUSTER_CHECK_MS", zc::CHECK_MS)?;
    let words = PyDict::new(m.py());
    for (name, i) in zc::words::ALL_WORDS {
        words.set_item(name, i)?;
    }
    m.add("CLUSTER_WORDS", words)?;
    Ok(())
}
