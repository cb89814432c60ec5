//! What the tier keeps in the host's segment: the words every process of the
//! host shares (see [`words`](crate::words)), the host's id, its write clock
//! and the notes of the latest write it knows of each key and tag (the rules
//! are [`times`](crate::times)'s; this is where they read and write).
//!
//! A note is a counter entry under [`note_key`]: a segment may evict it or
//! lose it in a clear, which narrows the defence against old bodies put back
//! into Redis (to [`MAX_AGE_US`](crate::MAX_AGE_US) after their write), never
//! fails a call.

use std::time::{SystemTime, UNIX_EPOCH};

use ziggurat_cache::{Bytes, Cache, Kind, Lookup, Reader};

use crate::body::{ALL, MAX_AGE_US};
use crate::keys::note_key;
use crate::times::{believable, bounded, fresh, next_write_time};
use crate::words;

/// The wall clock in µs since the epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// What a note of the host is about.
#[derive(Clone, Copy, Debug)]
pub enum Noted<'a> {
    /// A key written (set, add, delete, incr, touch).
    Key(&'a [u8]),
    /// A tag invalidated.
    Tag(&'a str),
}

impl Noted<'_> {
    /// The segment key the note lives under ([`note_key`] of `b"k" + key` or
    /// `b"t" + tag`).
    fn key(self) -> Vec<u8> {
        match self {
            Noted::Key(k) => note_key(&[b"k".as_slice(), k].concat()),
            Noted::Tag(t) => note_key(&[b"t".as_slice(), t.as_bytes()].concat()),
        }
    }
}

/// The segment of one host as the tier uses it.
#[derive(Clone, Copy)]
pub struct Host<'a> {
    /// The host's cache (its main segment holds the words and the notes).
    pub cache: &'a Cache,
}

/// A write time the host was asked to take that is too far ahead of its
/// clock (the front end says so once: the hosts' clocks disagree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahead {
    /// What carried it: "the host's own write clock", "an event", "a value in Redis".
    pub what: &'static str,
    /// How far ahead of this host's clock, in µs.
    pub by_us: u64,
}

impl<'a> Host<'a> {
    /// Word `i` (0 when the segment cannot be read: a degraded cache).
    pub fn load(&self, i: usize) -> u64 {
        self.cache.app_load(i).unwrap_or(0)
    }

    /// Adds `n` to word `i`.
    pub fn bump(&self, i: usize, n: u64) {
        loop {
            let cur = self.load(i);
            match self.cache.app_cas(i, cur, cur.wrapping_add(n)) {
                Ok(true) | Err(_) => return,
                Ok(false) => continue,
            }
        }
    }

    /// Raises word `i` to `v` (never lowers it).
    pub fn raise(&self, i: usize, v: u64) {
        loop {
            let cur = self.load(i);
            if cur >= v {
                return;
            }
            match self.cache.app_cas(i, cur, v) {
                Ok(true) | Err(_) => return,
                Ok(false) => continue,
            }
        }
    }

    /// This host's id in events: random, kept in the segment so every
    /// process of the host (and a restarted one) uses the same.
    pub fn id(&self) -> String {
        loop {
            let h = self.load(words::HOST);
            if h != 0 {
                return format!("{h:x}");
            }
            if self
                .cache
                .app_cas(words::HOST, 0, (random() >> 1).max(1))
                .is_err()
            {
                return "0".into();
            }
        }
    }

    /// Whether the host's reader has a place in the stream: until it has
    /// one, no value from Redis is kept in the segment (only returned), since
    /// the events about it might come before that place and never be applied.
    pub fn positioned(&self) -> bool {
        self.load(words::POSITIONED) != 0
    }

    /// A write time for a write made now: the wall clock, or one more than
    /// the latest write time this host gave or saw.
    pub fn clock(&self, ahead: &mut Option<Ahead>) -> u64 {
        let now = now_us();
        loop {
            let cur = self.load(words::CLOCK);
            let w = match next_write_time(now, cur) {
                Ok(w) => w,
                Err(w) => {
                    *ahead = Some(Ahead {
                        what: "the host's own write clock",
                        by_us: cur - now,
                    });
                    w
                }
            };
            match self.cache.app_cas(words::CLOCK, cur, w) {
                Ok(true) | Err(_) => return w,
                Ok(false) => continue,
            }
        }
    }

    /// The host learnt of a write made at `w` (another host's event); a time
    /// too far ahead of this host's clock is ignored.
    pub fn saw(&self, w: u64) -> Option<Ahead> {
        let now = now_us();
        if !believable(w, now) {
            return Some(Ahead {
                what: "an event",
                by_us: w - now,
            });
        }
        self.raise(words::CLOCK, w);
        None
    }

    /// The latest write this host knows of `what` was made at `w` (cut to
    /// the skew bound). Notes only rise: the write is a compare-and-set on
    /// the note's stamp, so a later note another process stores meanwhile is
    /// never replaced by this earlier one.
    pub fn note(&self, what: Noted<'_>, w: u64) {
        let w = bounded(w, now_us());
        let fk = what.key();
        let ttl = MAX_AGE_US as f64 / 1e6;
        for _ in 0..16 {
            // Taken before the read: a store between the two moves the stamp.
            let Some(seen) = self.cache.seen(&fk) else {
                std::hint::spin_loop();
                continue;
            };
            if self.known_at(&fk) >= w {
                return;
            }
            let payload = (w as i64).to_le_bytes();
            if !matches!(
                self.cache
                    .fill(&fk, &payload, Kind::Counter, ttl, &[], &seen),
                Ok(false)
            ) {
                return;
            }
        }
    }

    /// The whole cache was cleared at `w`: every body written before is refused.
    pub fn cleared(&self, w: u64) {
        self.raise(words::CLEARED, w);
    }

    fn known_at(&self, fk: &[u8]) -> u64 {
        let Some(main) = self.cache.main() else {
            return 0;
        };
        let reader = Reader::new(main, None, false);
        match reader.lookup(fk, None, false, &mut Bytes) {
            Lookup::Fresh(found, _) if found.trailer.kind == Kind::Counter => {
                found.payload.get(..8).map_or(0, |b| {
                    i64::from_le_bytes(b.try_into().expect("8 bytes")).max(0) as u64
                })
            }
            _ => 0,
        }
    }

    /// The note of a key or tag (0: none).
    pub fn known(&self, what: Noted<'_>) -> u64 {
        self.known_at(&what.key())
    }

    /// Whether a body of `key` written at `written` with `tags` is not older
    /// than a write, tag invalidation or clear this host knows of.
    pub fn fresh(&self, key: &[u8], written: u64, tags: &[String]) -> bool {
        let key_note = self.known(Noted::Key(key));
        fresh(written, self.load(words::CLEARED), key_note, tags, |t| {
            if t == ALL {
                0
            } else {
                self.known(Noted::Tag(t))
            }
        })
    }
}

/// A random number from the kernel (the time and pid, where it cannot be read).
pub(crate) fn random() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => now_us() ^ (u64::from(std::process::id()) << 32),
    }
}
