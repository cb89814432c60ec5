//! ziggurat-cache: the Cache's behaviour over ziggurat segments, with no
//! language runtime in it, so that every front end (Python today, Node.js
//! next) reads, writes and loads by the same rules and only converts values,
//! keeps its language's L1 objects and calls its language's loaders.
//!
//! A front end keeps one [`Cache`] per cache: the main segment and its
//! cached-miss segment (`<name>.neg`, which also holds the load leases), the
//! options ([`CacheOptions`], checked when the cache is made) and this
//! process's counters ([`Counts`]). Every argument rule (key, TTL, tags,
//! sizes) is here, with one error type, [`Error`], that the front end maps to
//! its own exceptions.
//!
//! # Reading
//!
//! 1. Look in L1 without a native call: an entry is valid while its deadline
//!    has not passed and every word it watches still holds the value it had
//!    when it was kept ([`L1Watch`] and the tags' [`Watch32`]: each is a
//!    read-only view of a word of the mapping, a `load` and a compare).
//! 2. On an L1 miss, check the key ([`check_key`]) and call [`Cache::read`]
//!    with a [`Front`]: it decodes what the segments hold, keeps it in L1
//!    when [`Found::keep`] says it may, and the read is counted here.
//!
//! # Writing
//!
//! [`Cache::store`] with the value's bytes ([`Body`]) and [`Kind`] (a 64-bit
//! int is a [`Kind::Counter`], stored natively so [`Cache::incr`] changes it
//! in place); the front end keeps the object in L1 only with
//! [`Written::kept`], else drops its L1 entry of the key. [`Cache::add`],
//! [`Cache::incr`], [`Cache::touch`], [`Cache::delete`],
//! [`Cache::invalidate_tags`] and [`Cache::clear`] need nothing of the front
//! end (a delete or clear also drops the front end's own L1 entries).
//!
//! # A miss (`fetch`)
//!
//! 1. L1 hit: answer. When [`Cache::refresh_due`] says the entry is late in
//!    its life, [`Cache::hit`] may hand a refresh to run in the background.
//! 2. L1 miss: [`Cache::plan`] (the call's options, checked before any
//!    loader runs), then [`Cache::begin`], and act on the [`Step`] until done:
//!    - [`Step::Value`]: answer the value; with a [`Miss`], run the loader in
//!      the background and end that miss as a LOAD's below.
//!    - [`Step::Negative`]: a cached miss: answer the caller's default.
//!    - [`Step::Wait`]: [`Cache::sleep`] and run the [`Sleep`] off the front
//!      end's lock (it blocks), then [`Cache::after_wait`] for the next step.
//!      A wait past `loader_timeout` is [`Error::LoadTimeout`].
//!    - [`Step::Load`]: this process holds the key's lease. If
//!      [`Cache::asks_tier_below`], ask the tier below first; when it has the
//!      value, answer with it and [`Cache::give_back`]. Otherwise call the
//!      loader, then:
//!      - it returned: one call, [`Cache::land`], with what it gave
//!        ([`Loaded`]: the value's bytes, the language's null, or a value
//!        that cannot be encoded), stores it and gives the lease back. Keep
//!        the value in L1 as for a write ([`Landed::written`]; without a
//!        segment, for [`Miss::ttl`]). When [`Landed::held`], a tier below
//!        is joined: tell it with [`Miss::ttl`], then [`Cache::give_back`].
//!        A value that cannot be stored is still answered.
//!      - it raised: [`Cache::failed`] gives the lease back and returns the
//!        stale value to answer with, if fail-safe allows; else raise.
//!      - it was cancelled: [`Cache::give_back`].
//!    - [`Step::NoSegment`]: no segment; share one load among the front end's
//!      own threads, and end it as a LOAD (no lease is held).
//!
//! # Beyond the Cache
//!
//! What else a front end would otherwise write again: [`Cache::stats`] and
//! [`Cache::loader_stats`] (named figures the front end only converts), a
//! [`Handoff`] for a step handed to its event loop or threads (ended once,
//! whoever finishes it), [`Look`] for a peek, the "auto" serializer's
//! envelope ([`format_of`], [`JsonText`]), and a [`Handle`] for a segment
//! it exposes on its own.
//!
//! A process that dies holding a lease is replaced by one waiter; one that
//! hangs holds the others at most `loader_timeout`. None of this takes or
//! returns a language object: payloads are bytes, values are the front end's
//! type parameter.

mod cache;
mod cluster;
mod counts;
pub mod defaults;
mod degraded;
mod duration;
mod encoding;
mod entry;
mod envelope;
mod error;
mod families;
mod flight;
mod front;
mod handle;
mod handoff;
mod key;
mod l1;
mod land;
mod lookup;
mod miss;
mod modes;
mod name;
mod namespace;
mod options;
mod pair;
mod peek;
mod rules;
mod size;
mod stats;
mod store;
mod tags;
mod ttl;
mod update;
mod watch;

pub use cache::{ttl_or_default, Cache};
pub use cluster::{cluster_joined, CLUSTER_WORDS, JOINED_WORD};
pub use counts::{Counter, Counts, Took};
pub use defaults::l1_negative_items;
pub use degraded::{degraded_refusal, degraded_warning, unset_degraded_mode};
pub use duration::{duration_text, parse_duration};
pub use encoding::ValueCode;
pub use entry::{
    counter_payload, encode, refresh_due, refresh_due_in, seal, split, Kind, Trailer, TRAILER_LEN,
};
pub use envelope::{
    format_by, format_of, pickle_bytes, unpickle_bytes, Format, JsonText, MAX_DEPTH, PICKLE_PROTO,
    PICKLE_PROTOCOL,
};
pub use error::{incr_overflow, Error, OVERFLOW};
pub use families::{
    Family, Group, MetricKind, Scope, DEGRADED_LABELS, FAMILIES, HOST_LABELS, PROCESS_LABELS,
    PROCESS_UNTIERED_LABELS, TIERS, UP_LABELS,
};
pub use flight::{process_alive, snapshot, Claim, Flight, FlightKey, Next};
pub use front::{Bytes, Found, Front, Missing, Payload, Read};
pub use handle::{Handle, HugePolicy, HugeStatus, OpenArgs, Record, WriteOp, HANDLE_SIZE};
pub use handoff::{Handoff, StepKind};
pub use key::{check_key, not_utf8, MAX_KEY};
pub use l1::{Entry, L1Stats, Peeked, L1};
pub use land::{Landed, Loaded};
pub use lookup::{Before, Lookup, Reader};
pub use miss::{Miss, Parked, Plan, Sleep, Step};
pub use modes::{COPY_MODES, DEGRADED_MODES, HUGE_PAGES_MODES};
pub use name::{name_and_version, segment_name, MAX_NAME, MAX_VERSION, VERSION_MARK};
pub use namespace::Namespace;
pub use options::{CacheOptions, CopyMode};
pub use pair::{neg_size_for, open_pair, pair_options, Pair, DEFAULT_SIZE, NEG_SUFFIX};
pub use peek::{Look, Sight};
pub use rules::{rule, rules, Rule, RuleValue};
pub use size::{parse_size, size_bytes, size_text, MAX_SIZE};
pub use stats::{LoaderStats, Stats};
pub use store::{store, store_negative, Body, Kept, Written};
pub use tags::{check_tags, MAX_TAGS, MIN_TAG_BYTES};
pub use ttl::{check_ttl, lifetime, Lifetime, MAX_TTL_SECONDS};
pub use update::{add, fill, incr, touch};
pub use watch::{L1Watch, Watch32, Watch64};
pub use ziggurat_core::{describe, Arg, Form, Layout, Problem, RustWords, Words};
