//! ziggurat-cluster: the cluster tier, with no language runtime: what the tier
//! stores in Redis or Valkey, how a host reads it back, and the connection it
//! does so over (the `redis` crate's blocking client; the rules themselves do
//! no I/O).
//!
//! - [`Signer`]: the MACs of values, counters and events (keyed BLAKE2b),
//!   with rotation of secrets;
//! - [`encode_value`], [`counter_head`], [`decode`], [`strip_prefix`]: the
//!   bodies, and the checks a body passes before a front end decodes it;
//! - [`signed_body`], [`parse`], [`place`], [`follow`]: the events of the
//!   invalidation stream and the order a host follows them in;
//! - [`start`], [`Follower`]: what a host's stream reader decides, as it
//!   (re)connects and for each entry;
//! - [`next_write_time`], [`believable`], [`bounded`], [`fresh`]: the write
//!   times, and the refusal of a body older than a write the host knows of;
//! - [`take`], [`standing_aside`]: which process of a host reads the stream;
//! - [`words`]: the words the tier keeps in the host's segment;
//! - [`Keys`], [`note_key`]: the names of the keys;
//! - [`READ`], [`WRITE`], [`RELEASE`]: the server-side scripts, and
//!   [`write_args`], [`px_value`], [`refusal`]: what a write sends and answers;
//! - [`redacted`], [`scrubbed`]: a Redis URL's passwords kept out of messages;
//! - [`Endpoint`], [`Server`]: where the server is and the login;
//! - [`timeout_ok`], [`stream_length_ok`]: the bounds of a tier's settings;
//! - [`Link`]: the connection, bounded by a timeout, with a breaker;
//! - [`Tier`]: the reads and writes of one cache, and [`Host`], what they
//!   keep in the host's segment (its words, its write clock, its notes);
//! - [`Reader`]: the thread that follows the stream for the host.
//!
//! The wire format is described in docs/format.md; front ends (the Python
//! package, the Node.js addon) drive these functions and word their errors.

mod body;
mod election;
mod event;
mod follower;
mod host;
mod keys;
mod limits;
mod link;
mod mac;
mod publish;
mod reader;
mod scripts;
mod server;
mod tier;
mod times;
mod url;
pub mod words;
mod writes;

pub use body::{
    counter_head, decode, encode_value, exact_int, strip_prefix, Data, Decoded, Found, Refused,
    ALL, EXACT_INT, MAX_AGE_US, MAX_SKEW_US,
};
pub use election::{standing_aside, take, Lease, Take, CHECK_MS, STALE_MS};
pub use event::{follow, parse, place, signed_body, tags_field, About, Event, Next};
pub use follower::{start, Clear, Entry, Follower, Start};
pub use host::{now_us, Ahead, Host, Noted};
pub use keys::{note_key, Keys};
pub use limits::{
    stream_length_ok, timeout_ok, tombstone_for, MAX_TIMEOUT_S, MIN_STREAM_LENGTH, RETRY_AFTER,
};
pub use link::{Dedicated, Fault, Link};
pub use mac::{SecretProblem, Signer, MAC_LEN, MIN_SECRET};
pub use reader::{Reader, OWN_PAUSE};
pub use scripts::{READ, RELEASE, WRITE};
pub use server::{Address, Endpoint, Server};
pub use tier::{Counts, Held, NotDone, Settings, Stored, Tier, Warning};
pub use times::{believable, bounded, fresh, next_write_time};
pub use url::{redacted, scrubbed, SCHEMES};
pub use writes::{px, px_since, px_value, refusal, write_args, Refusal};
