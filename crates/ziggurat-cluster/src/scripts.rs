//! The server-side scripts of the tier (Lua, run with EVALSHA): each write and
//! its event are one atomic step in Redis, and a read checks the value's tags
//! there too.
//!
//! A stored value is `prefix ‖ body`. The prefix (written by the scripts, read
//! only by them and [`strip_prefix`](crate::strip_prefix)) lists the value's
//! tags with each tag's version when it was written; a read returns the value
//! only while every tag still has that version, so invalidating a tag (one
//! HINCRBY) voids every value carrying it, on every host, at once. A clear of
//! the whole cache is the same with [`ALL`](crate::ALL), which every value carries.
//!
//! A write carries its host's fence: a host that could not reach Redis raises
//! its fence before it publishes its clear, so a write it sent before (which
//! timed out, so the host kept it local, but which the server may still run
//! when it wakes) is refused and cannot land after the clear meant to void it.

/// Reads a value. KEYS: the value, the tag versions
/// ([`Keys::read`](crate::Keys::read)). Returns the stored value, prefix
/// included; nil (missing, a tombstone, or voided by a tag, which it deletes);
/// or for a counter `{value, pttl}`, since its body holds no expiry.
pub const READ: &str = concat!(
    include_str!("../lua/check.lua"),
    include_str!("../lua/read.lua")
);

/// Writes and publishes. KEYS: [`Keys::write`](crate::Keys::write). ARGV: op,
/// `host:fence`, the stream's length, the event's `k`, its MAC and its write
/// time, then per op:
/// - set, add, fill: the body, px (0: no expiry), the tags;
/// - del: the tombstone's px;
/// - incr: delta, default (empty: none), px, the counter head
///   ([`counter_head`](crate::counter_head)), the tags;
/// - touch: px, the body expected (empty for a counter), the new body;
/// - tags: the tags; clear, recover: [`ALL`](crate::ALL).
///
/// Returns `{seq (0 when nothing was published), result}`, or the errors
/// FENCED, MISSING, NOTINT and OVERFLOW. A fill publishes nothing.
pub const WRITE: &str = concat!(
    include_str!("../lua/check.lua"),
    include_str!("../lua/common.lua"),
    include_str!("../lua/write.lua")
);

/// Releases a cluster-wide load lease. KEYS: the lease. ARGV: the holder's
/// token. Deletes it only if it is still that holder's (it may have expired
/// and been taken by another host).
pub const RELEASE: &str = include_str!("../lua/release.lua");
