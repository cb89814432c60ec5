//! What a host's stream reader decides, with no I/O: where it starts following
//! ([`start`]) and what it does with each entry it reads ([`Follower::entry`]).
//! The reader (a front end's thread, or a process of its own) reads the stream
//! and the server's counters, asks these, and carries out the answer on the
//! host's segment: clear it, apply an event, move its position.
//!
//! A host expects the events in order, `last + 1` (see [`follow`]); its own
//! events it passes reading only their place ([`place`]), since its segment
//! already has those writes. The stream's generation tells a server that lost
//! its data (a new generation) from one that did not.

use crate::event::{follow, parse, place, Event, Next};
use crate::mac::Signer;

/// Why a host clears its segment rather than go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clear {
    /// The server's stream is not the one the host followed (its generation
    /// changed: it restarted without its data, or failed over to a replica
    /// that lacked it), found as the reader (re)connects.
    OtherStream,
    /// The server's sequence went back, from the host's position to the
    /// server's, found as the reader (re)connects.
    SequenceBehind {
        /// The host's position.
        ours: u64,
        /// The server's sequence.
        server: u64,
    },
    /// An entry of a new generation, while the host followed another.
    GenerationChanged,
    /// Events between `from` and `to` are no longer in the stream.
    Gap {
        /// The first one missing.
        from: u64,
        /// The last one missing.
        to: u64,
    },
    /// An entry numbered `to` after the host's `from`.
    Back {
        /// The host's last.
        from: u64,
        /// The entry's number.
        to: u64,
    },
}

impl Clear {
    /// The reason in words, for the warning a host logs as it clears.
    ///
    /// ```
    /// use ziggurat_cluster::Clear;
    /// assert_eq!(
    ///     Clear::Gap { from: 5, to: 7 }.reason(),
    ///     "events 5 to 7 are no longer in the stream (trimmed, or lost by the server) and cannot be applied"
    /// );
    /// ```
    pub fn reason(&self) -> String {
        match *self {
            Clear::OtherStream => "the server's event stream is not the one this host followed \
                (it restarted without its data, or failed over to a replica that lacked it)"
                .into(),
            Clear::SequenceBehind { ours, server } => format!(
                "the server's event sequence went back from {ours} to {server} (it lost its \
                 latest events: a failover to a replica that lacked them)"
            ),
            Clear::GenerationChanged => "the server's event stream changed generation (it \
                restarted without its data while this host followed it)"
                .into(),
            Clear::Gap { from, to } => format!(
                "events {from} to {to} are no longer in the stream (trimmed, or lost by the \
                 server) and cannot be applied"
            ),
            Clear::Back { from, to } => format!("the event sequence went back from {from} to {to}"),
        }
    }
}

/// Where a reader starts, as it (re)connects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Follow on from the host's position.
    Resume,
    /// Follow on, and take the server's generation (the host had none yet).
    TakeGeneration(u64),
    /// Start at the stream's end: the host has no position, so nothing was
    /// kept from Redis that events could have voided.
    AdoptEnd,
    /// Clear the host's segment, then start at the stream's end.
    ClearAndAdoptEnd(Clear),
}

/// Where a reader starts: the host's position (`positioned`, `seq`, `gen`)
/// against the server's sequence and generation.
///
/// ```
/// use ziggurat_cluster::{start, Clear, Start};
/// assert_eq!(start(false, 0, 0, 9, 1), Start::AdoptEnd);
/// assert_eq!(start(true, 9, 1, 12, 1), Start::Resume);
/// assert_eq!(start(true, 9, 1, 12, 2), Start::ClearAndAdoptEnd(Clear::OtherStream));
/// assert_eq!(start(true, 9, 1, 3, 1), Start::ClearAndAdoptEnd(Clear::SequenceBehind { ours: 9, server: 3 }));
/// ```
pub fn start(positioned: bool, seq: u64, gen: u64, server_seq: u64, server_gen: u64) -> Start {
    if !positioned {
        Start::AdoptEnd
    } else if gen != 0 && server_gen != gen {
        Start::ClearAndAdoptEnd(Clear::OtherStream)
    } else if server_seq < seq {
        Start::ClearAndAdoptEnd(Clear::SequenceBehind {
            ours: seq,
            server: server_seq,
        })
    } else if gen == 0 && server_gen != 0 {
        Start::TakeGeneration(server_gen)
    } else {
        Start::Resume
    }
}

/// What the reader does with one entry.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Entry {
    /// Its number, the host's new `last`; `None` when refused (forged or
    /// malformed: passed, not applied, counted as a bad signature).
    pub seq: Option<u64>,
    /// Clears to make first, in order.
    pub clears: Vec<Clear>,
    /// The generation the host follows from now on, when it changed.
    pub generation: Option<u64>,
    /// Another host's event to apply (after the clears).
    pub apply: Option<Event>,
    /// Whether the entry's age is a sample of the invalidation lag (another
    /// host's event: the host's own invalidate nothing here).
    pub lag_sample: bool,
}

/// The reader's rule for the entries of a host (`me`, its id in events).
///
/// ```
/// use ziggurat_cluster::{signed_body, Follower, Signer};
/// let s = Signer::new(b"c", &[b"0123456789abcdef".to_vec()]).unwrap();
/// let f = Follower::new("a1");
/// // Its own next event: passed on its place alone.
/// let own: Vec<(&[u8], &[u8])> = vec![(b"s", b"8"), (b"h", b"a1"), (b"g", b"3")];
/// assert_eq!(f.entry(&own, 7, 3, &s).seq, Some(8));
/// // Another host's, signed: applied.
/// let m = s.event_mac(&signed_body("b2", "del", b"k", 5));
/// let other: Vec<(&[u8], &[u8])> = vec![(b"s", b"8"), (b"h", b"b2"), (b"o", b"del"), (b"k", b"k"), (b"w", b"5"), (b"g", b"3"), (b"m", &m)];
/// let e = f.entry(&other, 7, 3, &s);
/// assert!(e.apply.is_some() && e.clears.is_empty() && e.lag_sample);
/// ```
#[derive(Clone, Debug)]
pub struct Follower {
    me: Vec<u8>,
}

impl Follower {
    /// The follower of the host whose id in events is `me`.
    pub fn new(me: &str) -> Follower {
        Follower {
            me: me.as_bytes().to_vec(),
        }
    }

    /// Whether an entry's `fields` name this host.
    pub fn own(&self, fields: &[(&[u8], &[u8])]) -> bool {
        fields
            .iter()
            .any(|(n, v)| *n == b"h" && *v == self.me.as_slice())
    }

    /// The entry with `fields`, read after the host's `last` in generation
    /// `gen` (0: not known yet).
    pub fn entry(&self, fields: &[(&[u8], &[u8])], last: u64, gen: u64, signer: &Signer) -> Entry {
        let own = self.own(fields);
        let mut out = Entry::default();
        let (seq, ev_gen, event) = if own {
            match place(fields) {
                Some((seq, g)) if gen != 0 && seq == last.wrapping_add(1) && g == gen => {
                    // The next of a run of the host's own events: nothing else to read.
                    out.seq = Some(seq);
                    return out;
                }
                Some((seq, g)) => (seq, g, None),
                None => return out,
            }
        } else {
            match parse(fields, signer) {
                Some(e) => (e.seq, e.gen, Some(e)),
                None => return out,
            }
        };
        // A new generation starts the host over at this entry: cleared, it applies it.
        let renewed = ev_gen != 0 && gen != 0 && ev_gen != gen;
        if renewed {
            out.clears.push(Clear::GenerationChanged);
        }
        if ev_gen != 0 && ev_gen != gen {
            out.generation = Some(ev_gen);
        }
        let step = if renewed {
            Next::Apply
        } else {
            follow(last, seq)
        };
        match step {
            Next::Gap => out.clears.push(Clear::Gap {
                from: last + 1,
                to: seq - 1,
            }),
            Next::Back => out.clears.push(Clear::Back {
                from: last,
                to: seq,
            }),
            Next::Apply => out.apply = event,
        }
        out.lag_sample = !own;
        out.seq = Some(seq);
        out
    }
}
