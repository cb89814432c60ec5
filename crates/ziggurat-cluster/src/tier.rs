//! The tier of one cache: its reads from Redis (after a miss in the host's
//! tiers) and its writes to Redis with their events, over a [`Link`].
//!
//! Reads: a value found is checked (MAC, expiry, write time), and copied into
//! the host's segment only if nothing voided the key while it travelled. A
//! front end decodes what it returns ([`Stored::data`]) with its serializer.
//!
//! Writes are [`publish`](crate::publish)'s.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;
use ziggurat_cache::{Cache, Kind};

use crate::body::{decode, strip_prefix, Data, Found, Refused, ALL, MAX_SKEW_US};
use crate::host::{now_us, random, Ahead, Host};
use crate::keys::Keys;
use crate::link::{Fault, Link};
use crate::mac::Signer;
use crate::publish::with_tags;
use crate::scripts::{READ, RELEASE, WRITE};
use crate::words;
use crate::writes::Refusal;

/// What a value read from Redis holds, owned.
#[derive(Clone, Debug, PartialEq)]
pub enum Held {
    /// The front end's serialized bytes.
    Encoded(Vec<u8>),
    /// An integer set as one.
    Int(i64),
    /// A counter's count.
    Counter(i64),
}

/// A value read from Redis.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    /// What it holds.
    pub data: Held,
    /// Seconds it stays valid.
    pub left_s: f64,
    /// Its tags (the tag every value carries left out).
    pub tags: Vec<String>,
}

/// Why a write was not done in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotDone {
    /// Redis could not be used: the front end writes its host alone (the
    /// host is marked dirty already).
    Local,
    /// `incr` refused by the script: no such key without a default, not an
    /// integer, or past ±2^53. The caller's mistake, worded by the front end.
    Incr(Refusal),
}

/// Something the front end says once, in its own log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// A value failed its MAC (tampered, another secret).
    Bad(Vec<u8>),
    /// A value older than a write this host knows of.
    Older(Vec<u8>),
    /// A write time too far ahead of this host's clock.
    Ahead(Ahead),
    /// The server answered a read with an error.
    ReadError(String),
    /// The server refused a write: writes stay on the host.
    Refused(String),
    /// The host's reader clears its segment, for this reason (each time).
    Cleared(String),
    /// The host's reader published the clear that follows writes kept on
    /// the host (how many), each time.
    Recovered(u64),
    /// The reader's thread met an error and stands again (each time).
    Reader(String),
}

impl Warning {
    /// What a front end logs for this warning of the cache `name` (its
    /// segment's name): the words are the same in every language.
    ///
    /// ```
    /// use ziggurat_cluster::Warning;
    /// assert_eq!(
    ///     Warning::Recovered(3).message("shop"),
    ///     "ziggurat cache \"shop\": 3 writes were kept on this host while Redis was unreachable; published a clear of the cache to every host"
    /// );
    /// ```
    pub fn message(&self, name: &str) -> String {
        let key = |k: &[u8]| format!("{:?}", String::from_utf8_lossy(k));
        let what = match self {
            Warning::Bad(k) => format!(
                "a value in Redis under {} failed its check (tampered, or written with another \
                 secret); it is treated as a miss and never decoded",
                key(k)
            ),
            Warning::Older(k) => format!(
                "a value in Redis under {} is older than a write of it this host knows of (put \
                 back by something that writes to Redis, or written at the same time by a host \
                 whose clock is behind); it is treated as a miss",
                key(k)
            ),
            Warning::Ahead(a) => format!(
                "{} is stamped {:.0} s ahead of this host's clock, more than the {:.0} s allowed; \
                 it is ignored (check the hosts' clocks)",
                a.what,
                a.by_us as f64 / 1e6,
                MAX_SKEW_US as f64 / 1e6
            ),
            Warning::ReadError(e) => format!("Redis answered a read with {e}"),
            Warning::Refused(e) => format!(
                "Redis refused a write ({e}); writes stay on this host until it accepts them again"
            ),
            Warning::Cleared(why) => format!("clearing this host's cache: {why}"),
            Warning::Recovered(n) => format!(
                "{n} writes were kept on this host while Redis was unreachable; published a \
                 clear of the cache to every host"
            ),
            Warning::Reader(e) => format!("stream reader: {e}"),
        };
        format!("ziggurat cache {name:?}: {what}")
    }
}

/// The tier's counters of this process.
#[derive(Default)]
pub struct Counts {
    /// Reads that found a value.
    pub hits: AtomicU64,
    /// Reads that found none.
    pub misses: AtomicU64,
    /// Values read that the host's segment took.
    pub fills: AtomicU64,
    /// Loads that waited for another host's and got its value.
    pub lease_waits: AtomicU64,
    /// Loads that waited for another host's in vain, and loaded.
    pub lease_timeouts: AtomicU64,
    /// Values that failed their MAC.
    pub bad_signatures: AtomicU64,
    /// Values refused as older than a write the host knows of.
    pub refused_older: AtomicU64,
    /// Values or events stamped too far ahead.
    pub refused_ahead: AtomicU64,
}

impl Counts {
    /// Every counter by the name front ends show it under (`stats()`), read
    /// now.
    ///
    /// ```
    /// let c = ziggurat_cluster::Counts::default();
    /// assert_eq!(c.all()[0], ("hits", 0));
    /// ```
    pub fn all(&self) -> [(&'static str, u64); 8] {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("hits", n(&self.hits)),
            ("misses", n(&self.misses)),
            ("fills", n(&self.fills)),
            ("lease_waits", n(&self.lease_waits)),
            ("lease_timeouts", n(&self.lease_timeouts)),
            ("bad_signatures", n(&self.bad_signatures)),
            ("refused_older", n(&self.refused_older)),
            ("refused_ahead", n(&self.refused_ahead)),
        ]
    }
}

/// The settings of a tier.
pub struct Settings {
    /// The segment's name (it names the keys in Redis).
    pub name: String,
    /// The stream's length (MAXLEN ~).
    pub stream_length: u64,
    /// How long a delete's tombstone keeps a load that started before it out.
    pub tombstone: Duration,
    /// Whether a load takes a lease across hosts.
    pub single_flight: bool,
    /// How long a load waits for another host's (the lease's lifetime).
    pub loader_timeout: Duration,
}

/// The tier of one cache (see the module).
pub struct Tier {
    /// The connection.
    pub link: Arc<Link>,
    pub(crate) signer: Signer,
    pub(crate) keys: Keys,
    pub(crate) settings: Settings,
    token: String,
    leases: Mutex<HashSet<Vec<u8>>>,
    pub(crate) shas: [String; 3],
    /// This process's counters.
    pub counts: Counts,
    warn: Box<dyn Fn(Warning) + Send + Sync>,
    warned: [AtomicBool; 5],
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

impl Tier {
    /// The tier of the cache `settings.name` over `link`, signing with
    /// `signer`; `warn` says a [`Warning`] in the front end's log (each kind
    /// once per process).
    pub fn new(
        link: Arc<Link>,
        signer: Signer,
        settings: Settings,
        warn: Box<dyn Fn(Warning) + Send + Sync>,
    ) -> Tier {
        let token = format!("{:016x}", random());
        let sha = |s: &str| redis::Script::new(s).get_hash().to_owned();
        Tier {
            keys: Keys::new(&settings.name),
            shas: [sha(READ), sha(WRITE), sha(RELEASE)],
            link,
            signer,
            settings,
            token,
            leases: Mutex::new(HashSet::new()),
            counts: Counts::default(),
            warn,
            warned: Default::default(),
        }
    }

    /// The keys in Redis.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The signer.
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Says `w` in the front end's log: each of the first five kinds once
    /// per process, the reader's each time.
    pub(crate) fn say(&self, w: Warning) {
        let i = match &w {
            Warning::Bad(_) => 0,
            Warning::Older(_) => 1,
            Warning::Ahead(_) => 2,
            Warning::ReadError(_) => 3,
            Warning::Refused(_) => 4,
            Warning::Cleared(_) | Warning::Recovered(_) | Warning::Reader(_) => {
                (self.warn)(w);
                return;
            }
        };
        if !self.warned[i].swap(true, Ordering::Relaxed) {
            (self.warn)(w);
        }
    }

    fn ahead(&self, a: Option<Ahead>) {
        if let Some(a) = a {
            self.say(Warning::Ahead(a));
        }
    }

    /// A write time for a write made now (see [`Host::clock`]).
    pub fn clock(&self, host: Host<'_>) -> u64 {
        let mut a = None;
        let w = host.clock(&mut a);
        self.ahead(a);
        w
    }

    /// The host learnt of a write made at `w` (another host's event); a time
    /// too far ahead of this host's clock is ignored (and said once).
    pub fn saw(&self, host: Host<'_>, w: u64) {
        self.ahead(host.saw(w));
    }

    // -- reads -------------------------------------------------------------------------

    /// What Redis stores under `key` while its tags are current (prefix
    /// included), and the milliseconds Redis keeps a counter (-1 for any
    /// other body). An error the server answers is none (said once).
    pub(crate) fn stored(&self, key: &[u8]) -> Result<Option<(Vec<u8>, i64)>, Fault> {
        let [vkey, tags] = self.keys.read(key);
        match self.link.script(&self.shas[0], READ, &[&vkey, &tags], &[]) {
            Ok(Value::BulkString(b)) => Ok(Some((b, -1))),
            Ok(Value::Array(mut a)) if a.len() == 2 => {
                let pttl = int_of(&a[1]);
                match a.swap_remove(0) {
                    Value::BulkString(b) => Ok(Some((b, pttl))),
                    _ => Ok(None),
                }
            }
            Ok(_) => Ok(None),
            Err(Fault::Reply(e)) => {
                self.say(Warning::ReadError(e));
                Ok(None)
            }
            Err(down) => Err(down),
        }
    }

    /// Checks and reads a stored value of `key` (prefix included).
    pub(crate) fn check(
        &self,
        host: Host<'_>,
        key: &[u8],
        stored: &[u8],
        pttl: i64,
    ) -> Option<(Stored, u64)> {
        let Some(body) = strip_prefix(stored) else {
            self.bad(key);
            return None;
        };
        let d = match decode(&self.signer, key, body, pttl, now_us()) {
            Ok(d) => d,
            Err(Refused::Bad) => {
                self.bad(key);
                return None;
            }
            Err(Refused::Ahead(w)) => {
                bump(&self.counts.refused_ahead);
                self.say(Warning::Ahead(Ahead {
                    what: "a value in Redis",
                    by_us: w.saturating_sub(now_us()),
                }));
                return None;
            }
            Err(Refused::Expired(_)) => return None,
        };
        if !host.fresh(key, d.written, &d.tags) {
            bump(&self.counts.refused_older);
            self.say(Warning::Older(key.to_vec()));
            return None;
        }
        let data = match d.found {
            Found::Encoded(b) => Held::Encoded(b.to_vec()),
            Found::Int(i) => Held::Int(i),
            Found::Counter(i) => Held::Counter(i),
        };
        let tags = d.tags.into_iter().filter(|t| t != ALL).collect();
        Some((
            Stored {
                data,
                left_s: d.left_s,
                tags,
            },
            d.written,
        ))
    }

    fn bad(&self, key: &[u8]) {
        bump(&self.counts.bad_signatures);
        self.say(Warning::Bad(key.to_vec()));
    }

    /// One read of `key` in Redis, copied into the host's segment when the
    /// host's reader has a place in the stream and nothing voided the key
    /// meanwhile; None: missing, voided, expired, refused, unreachable.
    fn lookup(&self, host: Host<'_>, key: &[u8]) -> Option<Stored> {
        if host.load(words::DIRTY) != 0 {
            // Writes kept on this host wait for the recovery: Redis may hold values
            // they replaced, so it is not read until then.
            return None;
        }
        let seen = if host.positioned() {
            host.cache.seen(key)
        } else {
            None
        };
        let found = match self.stored(key) {
            Ok(Some((stored, pttl))) => self.check(host, key, &stored, pttl).map(|(s, _)| s),
            Ok(None) | Err(_) => None,
        };
        let Some(found) = found else {
            bump(&self.counts.misses);
            return None;
        };
        bump(&self.counts.hits);
        if let Some(seen) = seen {
            if self.fill(host.cache, key, &found, &seen) {
                bump(&self.counts.fills);
            }
        }
        Some(found)
    }

    fn fill(&self, cache: &Cache, key: &[u8], s: &Stored, seen: &ziggurat_core::Snapshot) -> bool {
        let tags: Vec<Vec<u8>> = s.tags.iter().map(|t| t.as_bytes().to_vec()).collect();
        let r = match &s.data {
            Held::Encoded(b) => cache.fill(key, b, Kind::Value, s.left_s, &tags, seen),
            Held::Int(i) | Held::Counter(i) => {
                cache.fill(key, &i.to_le_bytes(), Kind::Counter, s.left_s, &tags, seen)
            }
        };
        r.unwrap_or(false)
    }

    /// The value of `key` in Redis, copied into the host's segment, or None.
    /// Called after a miss in the host's tiers (`loading`: by a load about to
    /// run its loader); never fails for Redis's sake.
    ///
    /// With `single_flight`, a loading caller first takes the key's lease in
    /// Redis; while another host holds it, the caller waits for that host's
    /// value to appear, at most the loader timeout, and then loads itself.
    pub fn ask(&self, host: Host<'_>, key: &[u8], loading: bool) -> Option<Stored> {
        let found = self.lookup(host, key);
        if found.is_some() || !(loading && self.settings.single_flight) {
            return found;
        }
        let lease = self.keys.lease(key);
        let ms = self.settings.loader_timeout.as_millis().max(1) as u64;
        let deadline = Instant::now() + self.settings.loader_timeout;
        let mut pause = Duration::from_millis(2);
        loop {
            let mut set = redis::cmd("SET");
            set.arg(&lease).arg(&self.token).arg("NX").arg("PX").arg(ms);
            match self.link.query(&set) {
                Ok(Value::Nil) => {}
                Ok(_) => {
                    self.leases
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key.to_vec());
                    return None; // this host loads; `tell` gives the lease back
                }
                Err(_) => return None,
            }
            if Instant::now() + pause > deadline {
                bump(&self.counts.lease_timeouts);
                return None;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
            if let Some(found) = self.lookup(host, key) {
                bump(&self.counts.lease_waits);
                return Some(found);
            }
        }
    }

    /// Whether this process holds the cluster-wide lease of `key` (taken by
    /// [`Tier::ask`]): then [`Tier::tell`] has Redis to talk to even without
    /// a value to offer.
    pub fn holds_lease(&self, key: &[u8]) -> bool {
        self.leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }

    /// How a load on this host ended: a value (`data`, for `ttl_s` > 0) is
    /// offered to Redis, where it lands only if no value and no recent
    /// delete is there; then the cluster-wide lease is given back, if held.
    pub fn tell(
        &self,
        host: Host<'_>,
        key: &[u8],
        data: Option<Data<'_>>,
        ttl_s: f64,
        tags: &[&str],
    ) {
        if let Some(data) = data.filter(|_| ttl_s > 0.0) {
            let w = self.clock(host);
            let (body, px) = self.body(key, data, ttl_s, tags, w);
            let px = px.to_string();
            let args = with_tags(vec![&body, px.as_bytes()], tags);
            let _ = self.run(host, "fill", key, b"", &args, 0);
        }
        let held = self
            .leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        if held {
            let lease = self.keys.lease(key);
            let _ = self
                .link
                .script(&self.shas[2], RELEASE, &[&lease], &[self.token.as_bytes()]);
        }
    }
}
