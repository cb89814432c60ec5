//! The stream reader: on each host, one process follows the cache's
//! invalidation stream and applies other hosts' events to the host's segment,
//! which voids every process's L1 at once through the stamps. It runs in a
//! thread of its own, with no language runtime: a front end starts it and
//! stops it.
//!
//! Every process that opens the cache runs one and stands for election: a
//! lease in the segment (the holder's pid and a heartbeat; the rule is
//! [`take`]). When the holder dies, or stops beating for [`STALE_MS`](crate::STALE_MS),
//! another process takes over within [`CHECK_MS`] and resumes from the
//! position the holder left in the segment (the last event applied, written
//! after each read's events: a read the holder did not finish is applied
//! again), so no event is missed. The position is checked against every
//! event's sequence number ([`Follower`]): a gap or a rewind means events
//! were lost, and the host clears its segment rather than stay stale.
//!
//! A host skips the events it wrote itself (its segment already has those
//! writes), reading only their place in the sequence; after a read that
//! brought nothing else, the reader waits [`OWN_PAUSE`] before the next, so a
//! host that writes often wakes its reader about once per millisecond rather
//! than once per write.
//!
//! A process that does nothing else can follow the stream for the host
//! instead (a `dedicated` reader, such as `ziggurat follow`): while it
//! lives, the workers' readers stand aside ([`standing_aside`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use redis::Value;
use ziggurat_cache::{process_alive, Cache};
use ziggurat_core::{current_pid, now_ms};

use crate::body::ALL;
use crate::election::{standing_aside, take, Lease, Take, CHECK_MS};
use crate::event::{parse, About, Event};
use crate::follower::{start, Follower, Start};
use crate::host::{now_us, Host, Noted};
use crate::link::{Dedicated, Fault};
use crate::tier::{int_of, Tier, Warning};
use crate::times::bounded;
use crate::words;

/// How long the reader lets events gather after a read that brought only its
/// host's own events.
pub const OWN_PAUSE: Duration = Duration::from_millis(1);

/// Entries one read takes at most.
const BATCH: usize = 1000;

/// One entry of the stream: its id and its fields.
type StreamEntry<'a> = (&'a [u8], Vec<(&'a [u8], &'a [u8])>);

/// The stream reader of one process (see the module).
pub struct Reader {
    tier: Arc<Tier>,
    host: Arc<Cache>,
    dedicated: bool,
    block: Duration,
    stop: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Applications still to fail (a test's failpoint).
    #[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
    failing: AtomicU32,
}

fn id_of(eid: &[u8]) -> (u64, u64) {
    let s = std::str::from_utf8(eid).unwrap_or("0-0");
    let (ms, n) = s.split_once('-').unwrap_or((s, "0"));
    (ms.parse().unwrap_or(0), n.parse().unwrap_or(0))
}

fn bulk(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// The entries of an `XRANGE`/`XREVRANGE` reply, or of one stream of an
/// `XREAD` reply, read in place (no field is copied).
fn entries(v: &Value) -> Vec<StreamEntry<'_>> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|e| {
            let Value::Array(pair) = e else { return None };
            let id = bulk(pair.first()?)?;
            let fields = match pair.get(1)? {
                Value::Array(flat) => flat
                    .chunks(2)
                    .filter_map(|kv| Some((bulk(&kv[0])?, bulk(kv.get(1)?)?)))
                    .collect(),
                _ => Vec::new(),
            };
            Some((id, fields))
        })
        .collect()
}

/// The `XREVRANGE` of the stream's last entry.
fn last_entry(stream: &[u8]) -> redis::Cmd {
    let mut cmd = redis::cmd("XREVRANGE");
    cmd.arg(stream).arg("+").arg("-").arg("COUNT").arg(1);
    cmd
}

/// What one read of the stream does to the reader's state.
struct Following {
    follower: Follower,
    replay_until: (u64, u64),
    replaying: bool,
    lags: VecDeque<f64>,
    lags_flushed: u64,
}

impl Reader {
    /// The reader of `tier` on the host's cache; `block`: how long one read
    /// of the stream waits for an entry. Not started.
    pub fn new(tier: Arc<Tier>, host: Arc<Cache>, dedicated: bool, block: Duration) -> Arc<Reader> {
        Arc::new(Reader {
            tier,
            host,
            dedicated,
            block,
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            failing: AtomicU32::new(0),
        })
    }

    fn h(&self) -> Host<'_> {
        Host { cache: &self.host }
    }

    /// Starts the thread (again, in a child after `fork`: threads do not
    /// cross it).
    pub fn start(self: &Arc<Self>) {
        self.stop.store(false, Ordering::Relaxed);
        let me = self.clone();
        let name = format!("ziggurat-l3-{}", self.tier.settings().name);
        let t = std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || me.run());
        if let Ok(t) = t {
            *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        }
    }

    /// Asks the reader to stop once the batch it applies is done, without
    /// giving the lease up yet (safe from a signal handler).
    pub fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.thread().unpark();
        }
    }

    /// Test hook: the next `n` events this reader applies fail (as a
    /// segment that refuses a write would make them), each to be read again.
    #[cfg(feature = "failpoints")]
    pub fn fail_applies(&self, n: u32) {
        self.failing.store(n, Ordering::Relaxed);
    }

    /// Whether [`Reader::halt`] or [`Reader::stop`] was asked for.
    pub fn halted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Stops the thread and gives the lease up, so another process takes
    /// over at once.
    pub fn stop(&self) {
        self.halt();
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        let pid = u64::from(current_pid());
        let c = &self.host;
        if self.h().load(words::LEASE) == pid {
            let _ = c.app_cas(words::LEASE, pid, 0);
        }
        if self.dedicated && self.h().load(words::FOLLOWER) == pid {
            let _ = c.app_cas(words::FOLLOWER, pid, 0);
        }
    }

    /// For a dedicated reader: marks this process as the host's follower;
    /// returns 0, or the pid of another live dedicated reader (then nothing
    /// changed).
    pub fn claim(&self) -> u64 {
        let pid = u64::from(current_pid());
        loop {
            let cur = self.h().load(words::FOLLOWER);
            if cur != 0 && cur != pid && u32::try_from(cur).is_ok_and(process_alive) {
                return cur;
            }
            match self.host.app_cas(words::FOLLOWER, cur, pid) {
                Ok(true) | Err(_) => {
                    self.stamp(words::FOLLOWER_AT);
                    return 0;
                }
                Ok(false) => continue,
            }
        }
    }

    /// Follows the stream in the calling thread until [`Reader::halt`].
    pub fn run(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            if self.take() {
                if let Err(why) = self.follow() {
                    if !why.is_empty() {
                        self.tier.say(Warning::Reader(why));
                    }
                }
            }
            if !self.stop.load(Ordering::Relaxed) {
                std::thread::park_timeout(Duration::from_millis(CHECK_MS));
            }
        }
    }

    // -- election ----------------------------------------------------------------------

    fn lease(&self) -> Lease {
        let h = self.h();
        Lease {
            holder: h.load(words::LEASE),
            beat_ms: h.load(words::BEAT),
            follower: h.load(words::FOLLOWER),
            follower_at_ms: h.load(words::FOLLOWER_AT),
            now_ms: now_ms(),
        }
    }

    fn take(&self) -> bool {
        let pid = u64::from(current_pid());
        let l = self.lease();
        let c = &self.host;
        match take(pid, self.dedicated, &l) {
            Take::HandBack => {
                let _ = c.app_cas(words::LEASE, pid, 0);
                false
            }
            Take::Ask => {
                self.stamp(words::FOLLOWER_AT);
                false
            }
            Take::Claim => {
                if !matches!(c.app_cas(words::LEASE, l.holder, pid), Ok(true)) {
                    return false;
                }
                self.stamp(words::BEAT);
                true
            }
            Take::Hold => true,
            Take::Wait => false,
        }
    }

    fn stamp(&self, word: usize) {
        self.set_word(word, now_ms());
    }

    fn set_word(&self, word: usize, v: u64) {
        let cur = self.h().load(word);
        if cur != v {
            let _ = self.host.app_cas(word, cur, v);
        }
    }

    fn holding(&self) -> bool {
        let pid = u64::from(current_pid());
        self.h().load(words::LEASE) == pid && !standing_aside(pid, self.dedicated, &self.lease())
    }

    // -- following -------------------------------------------------------------------------

    fn place(&self, seq: u64, at: (u64, u64)) {
        for (word, v) in [
            (words::ID_MS, at.0),
            (words::ID_SEQ, at.1),
            (words::SEQ, seq),
            (words::POSITIONED, 1),
        ] {
            self.set_word(word, v);
        }
    }

    fn clear(&self, why: String) {
        self.tier.say(Warning::Cleared(why));
        let _ = self.host.clear();
        self.h().bump(words::GAP_CLEARS, 1);
    }

    /// Starts following at the stream's end: a host with no position has
    /// nothing to catch up with (its segment is new, or was just cleared).
    fn adopt_end(
        &self,
        conn: &mut Dedicated<'_>,
        server_seq: u64,
        mut server_gen: u64,
    ) -> Result<(), Fault> {
        let keys = self.tier.keys();
        if server_gen == 0 {
            // A new stream: name its generation now, so a later loss is told apart.
            conn.query(redis::cmd("SET").arg(&keys.gen).arg(now_us()).arg("NX"))?;
            server_gen = int_of(&conn.query(redis::cmd("GET").arg(&keys.gen))?) as u64;
        }
        let reply = conn.query(&last_entry(&keys.stream))?;
        match entries(&reply).first() {
            Some((eid, fields)) => {
                // A forged last entry: the sequence says where the stream is.
                let seq = parse(fields, self.tier.signer()).map_or(server_seq, |e| e.seq);
                self.place(seq, id_of(eid));
            }
            None => self.place(server_seq, (0, 0)),
        }
        self.set_word(words::GEN, server_gen);
        Ok(())
    }

    /// Follows while this process holds the lease; `Err` with what went
    /// wrong (empty: the server could not be used, the breaker says why).
    fn follow(&self) -> Result<(), String> {
        let down = |f: Fault| match f {
            Fault::Down { .. } => String::new(),
            Fault::Reply(e) => format!("the server answered {e}"),
        };
        let tier = &self.tier;
        let keys = tier.keys().clone();
        let mut conn = tier
            .link
            .dedicated(self.block + Duration::from_secs(1))
            .map_err(down)?;
        let h = self.h();
        let seq = h.load(words::SEQ);
        let server = conn
            .query(redis::cmd("MGET").arg(&keys.seq).arg(&keys.gen))
            .map_err(down)?;
        let (server_seq, server_gen) = match &server {
            Value::Array(v) if v.len() == 2 => (int_of(&v[0]) as u64, int_of(&v[1]) as u64),
            _ => (0, 0),
        };
        match start(
            h.positioned(),
            seq,
            h.load(words::GEN),
            server_seq,
            server_gen,
        ) {
            Start::Resume => {}
            Start::TakeGeneration(g) => self.set_word(words::GEN, g),
            Start::AdoptEnd => self
                .adopt_end(&mut conn, server_seq, server_gen)
                .map_err(down)?,
            Start::ClearAndAdoptEnd(why) => {
                self.clear(why.reason());
                self.adopt_end(&mut conn, server_seq, server_gen)
                    .map_err(down)?;
            }
        }
        // Events already in the stream when the reader (re)connects are a replay of what
        // the host missed while no process followed (or Redis was away).
        let reply = conn.query(&last_entry(&keys.stream)).map_err(down)?;
        let tail = entries(&reply);
        let mut st = Following {
            follower: Follower::new(&h.id()),
            replay_until: tail.first().map_or((0, 0), |(eid, _)| id_of(eid)),
            replaying: !tail.is_empty(),
            lags: VecDeque::new(),
            lags_flushed: 0,
        };
        let block_ms = self.block.as_millis().to_string();
        let mut mine = false;
        while !self.stop.load(Ordering::Relaxed) && self.holding() {
            self.stamp(words::BEAT);
            let dirty = h.load(words::DIRTY);
            if dirty != 0 {
                tier.recover(h).map_err(|_| String::new())?;
                let _ = h.cache.app_cas(words::DIRTY, dirty, 0);
                tier.say(Warning::Recovered(dirty));
            }
            if mine {
                // A host that writes wakes its reader once per write, for an event it
                // only moves past: after a read of its own events only, a millisecond's
                // events gather and are taken in one read.
                std::thread::sleep(OWN_PAUSE);
            }
            let last = h.load(words::SEQ);
            let sid = format!("{}-{}", h.load(words::ID_MS), h.load(words::ID_SEQ));
            let mut xread = redis::cmd("XREAD");
            xread
                .arg("COUNT")
                .arg(BATCH)
                .arg("BLOCK")
                .arg(&block_ms)
                .arg("STREAMS")
                .arg(&keys.stream)
                .arg(&sid);
            // RESP2: [[stream, entries]], or nil when none came within the block.
            let reply = conn.query(&xread).map_err(down)?;
            let got = match &reply {
                Value::Array(streams) => match streams.first() {
                    Some(Value::Array(pair)) => pair.get(1).map(entries).unwrap_or_default(),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            let others = self.batch(&got, last, &mut st)?;
            mine = !got.is_empty() && !others;
            self.flush_lags(&mut st);
        }
        Ok(())
    }

    /// Applies one read's entries in order, as the follower says; whether any
    /// entry was another host's.
    ///
    /// The host's position (the last entry passed and its number) is written
    /// once, after the entries it passed, and only while this process still
    /// holds the lease: a reader that dies before that, or loses the lease,
    /// leaves the entries to be applied again, which is harmless (a delete, an
    /// invalidation or a clear done twice).
    fn batch(
        &self,
        got: &[StreamEntry],
        mut last: u64,
        st: &mut Following,
    ) -> Result<bool, String> {
        let h = self.h();
        let mut failed = None;
        let mut gen = h.load(words::GEN);
        let (mut applied, mut replays, mut others) = (0u64, 0u64, false);
        let mut passed: Option<&[u8]> = None;
        for (eid, fields) in got {
            let e = st.follower.entry(fields, last, gen, self.tier.signer());
            others = others || !st.follower.own(fields);
            let Some(seq) = e.seq else {
                self.tier
                    .counts
                    .bad_signatures
                    .fetch_add(1, Ordering::Relaxed);
                passed = Some(eid);
                continue; // refused: passed, not applied
            };
            for why in e.clears {
                self.clear(why.reason());
            }
            if let Some(g) = e.generation {
                self.set_word(words::GEN, g);
                gen = g;
            }
            if let Some(ev) = &e.apply {
                if let Err(why) = self.apply(ev) {
                    // Not passed: the entry is read again, never skipped (the entries
                    // before it are passed).
                    failed = Some(why);
                    break;
                }
            }
            let at = id_of(eid);
            if e.lag_sample {
                // The lag of an invalidation: an own event invalidates nothing here.
                st.lags.push_back((now_us() / 1000) as f64 - at.0 as f64);
                if st.lags.len() > 2000 {
                    st.lags.pop_front();
                }
            }
            passed = Some(eid);
            last = seq;
            applied += 1;
            if st.replaying {
                if at <= st.replay_until {
                    replays += 1;
                } else {
                    st.replaying = false;
                }
            }
        }
        if let Some(eid) = passed {
            if self.holding() {
                self.place(last, id_of(eid));
                h.bump(words::APPLIED, applied);
                h.bump(words::REPLAYS, replays);
            }
        }
        failed.map_or(Ok(others), |why| {
            Err(format!(
                "an event could not be applied ({why}); it is read again"
            ))
        })
    }

    fn apply(&self, ev: &Event) -> Result<(), String> {
        #[cfg(feature = "failpoints")]
        if self.failing.load(Ordering::Relaxed) > 0 {
            self.failing.fetch_sub(1, Ordering::Relaxed);
            return Err("failpoint".into());
        }
        // The host notes the event's write time first, so a process that misses after
        // the segment changed already refuses what the event made old.
        let h = self.h();
        self.tier.saw(h, ev.w);
        let w = bounded(ev.w, now_us());
        let cache = h.cache;
        let done = match (&ev.about, ev.op.as_str()) {
            (_, "clear" | "recover") => {
                h.cleared(w);
                cache.clear()
            }
            (About::Tags(tags), _) if tags.iter().any(|t| t == ALL) => {
                h.cleared(w);
                cache.clear()
            }
            (About::Tags(tags), _) => {
                for t in tags {
                    h.note(Noted::Tag(t), w);
                }
                let tags: Vec<Vec<u8>> = tags.iter().map(|t| t.as_bytes().to_vec()).collect();
                cache.invalidate_tags(&tags)
            }
            (About::Key(k), _) => {
                h.note(Noted::Key(k), w);
                cache.delete(k).map(|_| ())
            }
        };
        done.map_err(|e| e.to_string())
    }

    fn flush_lags(&self, st: &mut Following) {
        let now = now_ms();
        if st.lags.is_empty() || now.saturating_sub(st.lags_flushed) < 500 {
            return;
        }
        st.lags_flushed = now;
        let mut xs: Vec<f64> = st.lags.iter().copied().collect();
        xs.sort_by(f64::total_cmp);
        for (word, q) in [(words::LAG_P50, 0.5), (words::LAG_P99, 0.99)] {
            let i = ((q * xs.len() as f64) as usize).min(xs.len() - 1);
            self.set_word(word, (xs[i] * 1000.0).max(0.0) as u64);
        }
    }
}
