//! Whether a cache's segment is joined to a cluster tier (Redis, by the
//! Python front end's `redis=`). A front end that cannot take part in that
//! tier must refuse to write such a cache: its writes would reach this host
//! only, and every other host would keep serving the old value.
//!
//! The tier keeps its state in the segment's application words
//! ([`Segment::app_load`]): the pid of the host's stream reader (word 0), the
//! position it applied (word 2, with word 12 set once it holds one) and the
//! host's id in events (word 5, set on the first write or connection), and
//! the join marker (word 20, [`JOINED_WORD`]), which a process sets as it
//! joins the tier, before any write or connection, so that a front end
//! opening the cache in the meantime is refused too. A segment where any is
//! non-zero has, or had, a cluster tier; a segment that never had one keeps
//! them all zero.

use ziggurat_core::Segment;

/// The word a process joining the cluster tier sets to 1 (a compare-and-swap from
/// 0), as it joins: the Python front end's `ClusterTier` does, under the name `W.JOINED`.
///
/// ```
/// use ziggurat_core::{Options, Segment};
/// let opts = Options { size: 1 << 20, directory: std::env::temp_dir(), ..Options::default() };
/// let seg = Segment::open(&format!("doc-joined-{}", std::process::id()), &opts).unwrap();
/// seg.app_cas(ziggurat_cache::JOINED_WORD, 0, 1).unwrap();
/// assert!(ziggurat_cache::cluster_joined(&seg));
/// seg.unlink().unwrap();
/// ```
pub const JOINED_WORD: usize = 20;

/// The application words a cluster tier sets (reader pid, sequence, host id,
/// positioned, join marker): see the module's note.
pub const CLUSTER_WORDS: [usize; 5] = [0, 2, 5, 12, JOINED_WORD];

/// Whether `main` (a cache's main segment) is, or was, joined to a cluster
/// tier by some process of the host.
///
/// ```
/// use ziggurat_core::{Options, Segment};
/// let opts = Options { size: 1 << 20, directory: std::env::temp_dir(), ..Options::default() };
/// let seg = Segment::open(&format!("doc-cluster-{}", std::process::id()), &opts).unwrap();
/// assert!(!ziggurat_cache::cluster_joined(&seg));
/// seg.app_cas(5, 0, 42).unwrap();
/// assert!(ziggurat_cache::cluster_joined(&seg));
/// seg.unlink().unwrap();
/// ```
pub fn cluster_joined(main: &Segment) -> bool {
    CLUSTER_WORDS
        .iter()
        .any(|&i| main.app_load(i).is_some_and(|w| w != 0))
}
