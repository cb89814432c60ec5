//! The tier's writes: the value and its event go to Redis in one script
//! call, then the host's segment is updated. When Redis cannot be used, the
//! call answers [`NotDone::Local`]: the front end writes its host alone, and
//! the host is marked dirty; its stream reader publishes a clear of the whole
//! cache once Redis is back, since the other hosts and Redis may hold values
//! older than what was written here.

use redis::Value;
use ziggurat_cache::{Cache, Kind};

use crate::body::{counter_head, encode_value, strip_prefix, Data, ALL};
use crate::event::tags_field;
use crate::host::{now_us, Host, Noted};
use crate::link::Fault;
use crate::scripts::WRITE;
use crate::tier::{int_of, Held, NotDone, Tier, Warning};
use crate::words;
use crate::writes::{px_since, px_value, refusal, write_args, Refusal};

impl Tier {
    // -- writes ------------------------------------------------------------------------

    /// The signed body of `data` and how long Redis keeps it.
    pub(crate) fn body(
        &self,
        key: &[u8],
        data: Data<'_>,
        ttl_s: f64,
        tags: &[&str],
        w: u64,
    ) -> (Vec<u8>, u64) {
        let expiry = if ttl_s.is_infinite() {
            0
        } else {
            (now_us() / 1000).saturating_add((ttl_s * 1000.0) as u64)
        };
        let mut all: Vec<&str> = tags.to_vec();
        all.push(ALL);
        (
            encode_value(&self.signer, key, data, expiry, w, &all),
            px_value(ttl_s),
        )
    }

    /// Runs the write script for `op` (`k`: the event's key or tags field).
    pub(crate) fn run(
        &self,
        host: Host<'_>,
        op: &str,
        key: &[u8],
        k: &[u8],
        extra: &[&[u8]],
        w: u64,
    ) -> Result<Vec<Value>, NotDone> {
        let fence = host.load(words::FENCE);
        let head = write_args(
            &self.signer,
            &host.id(),
            fence,
            self.settings.stream_length,
            op,
            k,
            w,
        );
        let keys = self.keys.write(key);
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut args: Vec<&[u8]> = head.iter().map(Vec::as_slice).collect();
        args.extend_from_slice(extra);
        match self.link.script(&self.shas[1], WRITE, &keys, &args) {
            Ok(Value::Array(r)) => {
                if r.first().map_or(0, int_of) != 0 {
                    host.bump(words::PUBLISHED, 1);
                }
                Ok(r)
            }
            Ok(_) => Ok(Vec::new()),
            Err(Fault::Down { .. }) => Err(NotDone::Local),
            Err(Fault::Reply(e)) => match refusal(&e) {
                r @ (Refusal::Missing | Refusal::NotInt | Refusal::Overflow) if op == "incr" => {
                    Err(NotDone::Incr(r))
                }
                // This process's fence is older than its host's: a recovery is under way.
                Refusal::Fenced => Err(NotDone::Local),
                _ => {
                    // Out of memory, a read-only replica...: the app must not fail for it.
                    self.link.count_error();
                    self.say(Warning::Refused(e));
                    Err(NotDone::Local)
                }
            },
        }
    }

    /// A write was kept on this host alone: the reader will publish a clear.
    pub fn dirty(&self, host: Host<'_>) {
        host.bump(words::DIRTY, 1);
    }

    fn run_or_dirty(
        &self,
        host: Host<'_>,
        op: &str,
        key: &[u8],
        k: &[u8],
        extra: &[&[u8]],
        w: u64,
    ) -> Result<Vec<Value>, NotDone> {
        let r = self.run(host, op, key, k, extra, w);
        if matches!(r, Err(NotDone::Local)) {
            self.dirty(host);
        }
        r
    }

    /// After a write reached Redis: the host's segment takes the value unless
    /// the key changed meanwhile, when it drops the key instead (to be read
    /// again from Redis).
    fn local(
        &self,
        cache: &Cache,
        key: &[u8],
        seen: Option<ziggurat_core::Snapshot>,
        data: Data<'_>,
        ttl_s: f64,
        tags: &[&str],
    ) {
        let tags: Vec<Vec<u8>> = tags.iter().map(|t| t.as_bytes().to_vec()).collect();
        let kept = seen.is_some_and(|seen| {
            match data {
                Data::Encoded(b) => cache.fill(key, b, Kind::Value, ttl_s, &tags, &seen),
                Data::Int(i) => {
                    cache.fill(key, &i.to_le_bytes(), Kind::Counter, ttl_s, &tags, &seen)
                }
            }
            .unwrap_or(false)
        });
        if !kept {
            let _ = cache.delete(key);
        }
    }

    fn value_write(
        &self,
        host: Host<'_>,
        op: &str,
        key: &[u8],
        data: Data<'_>,
        ttl_s: f64,
        tags: &[&str],
    ) -> Result<bool, NotDone> {
        let w = self.clock(host);
        let (body, px) = self.body(key, data, ttl_s, tags, w);
        let seen = if host.positioned() {
            host.cache.seen(key)
        } else {
            None
        };
        let px = px.to_string();
        let r = self.run_or_dirty(
            host,
            op,
            key,
            key,
            &with_tags(vec![&body, px.as_bytes()], tags),
            w,
        )?;
        let stored = op == "set" || r.get(1).map_or(0, int_of) != 0;
        if stored {
            host.note(Noted::Key(key), w);
            self.local(host.cache, key, seen, data, ttl_s, tags);
        }
        Ok(stored)
    }

    /// `set` for the whole cluster: Redis and its event, then this host.
    /// `Err(NotDone::Local)`: write the host alone.
    pub fn set(
        &self,
        host: Host<'_>,
        key: &[u8],
        data: Data<'_>,
        ttl_s: f64,
        tags: &[&str],
    ) -> Result<(), NotDone> {
        self.value_write(host, "set", key, data, ttl_s, tags)
            .map(|_| ())
    }

    /// `add` for the whole cluster: exactly one caller of all hosts gets true.
    pub fn add(
        &self,
        host: Host<'_>,
        key: &[u8],
        data: Data<'_>,
        ttl_s: f64,
        tags: &[&str],
    ) -> Result<bool, NotDone> {
        self.value_write(host, "add", key, data, ttl_s, tags)
    }

    /// `delete` for the whole cluster: whether Redis held a value (the front
    /// end deletes its host's copy itself, and says whether either held one).
    pub fn delete(&self, host: Host<'_>, key: &[u8]) -> bool {
        let w = self.clock(host);
        let ms = (self.settings.tombstone.as_millis().max(1) as u64).to_string();
        match self.run_or_dirty(host, "del", key, key, &[ms.as_bytes()], w) {
            Ok(r) => {
                host.note(Noted::Key(key), w);
                r.get(1).map_or(0, int_of) != 0
            }
            Err(_) => false,
        }
    }

    /// `incr` for the whole cluster (the counter lives in Redis): the count.
    #[allow(clippy::too_many_arguments)] // the call's own arguments
    pub fn incr(
        &self,
        host: Host<'_>,
        key: &[u8],
        delta: i64,
        default: Option<i64>,
        ttl_s: f64,
        tags: &[&str],
    ) -> Result<i64, NotDone> {
        let w = self.clock(host);
        let head = counter_head(&self.signer, key, w);
        let (delta, default, px) = (
            delta.to_string(),
            default.map_or(String::new(), |d| d.to_string()),
            px_value(ttl_s).to_string(),
        );
        let head = vec![delta.as_bytes(), default.as_bytes(), px.as_bytes(), &head];
        let r = self.run_or_dirty(host, "incr", key, key, &with_tags(head, tags), w)?;
        host.note(Noted::Key(key), w);
        let _ = host.cache.delete(key);
        Ok(r.get(1).map_or(0, int_of))
    }

    /// `touch` for the whole cluster: whether the key held a value.
    ///
    /// A value's expiry is signed: it is signed again with the new one, and
    /// stored only if the value is still the one read (a counter's expiry is
    /// Redis's own). The write time stays the one signed with it: a touch is
    /// not a write, so a value put back into Redis and touched is still as
    /// old as it was. A value older than a write this host knows of is not
    /// touched at all.
    pub fn touch(&self, host: Host<'_>, key: &[u8], ttl_s: f64) -> Result<bool, NotDone> {
        let (stored, pttl) = match self.stored(key) {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(false),
            Err(_) => {
                self.dirty(host);
                return Err(NotDone::Local);
            }
        };
        let Some((found, written)) = self.check(host, key, &stored, pttl) else {
            return Ok(false);
        };
        let body = strip_prefix(&stored).unwrap_or_default();
        let px = px_since(ttl_s, written, now_us()).to_string();
        let r = if body.first() == Some(&b'N') {
            self.run_or_dirty(host, "touch", key, key, &[px.as_bytes(), b""], written)?
        } else {
            let tags: Vec<&str> = found.tags.iter().map(String::as_str).collect();
            let data = match &found.data {
                Held::Encoded(b) => Data::Encoded(b),
                Held::Int(i) | Held::Counter(i) => Data::Int(*i),
            };
            let (new, _) = self.body(key, data, ttl_s, &tags, written);
            self.run_or_dirty(
                host,
                "touch",
                key,
                key,
                &[px.as_bytes(), body, &new],
                written,
            )?
        };
        let done = r.get(1).map_or(0, int_of) != 0;
        if done {
            host.note(Noted::Key(key), written);
        }
        let _ = host.cache.delete(key);
        Ok(done)
    }

    /// `invalidate_tags` for the whole cluster, Redis's values included.
    pub fn invalidate_tags(&self, host: Host<'_>, tags: &[&str]) {
        let w = self.clock(host);
        let field = tags_field(tags);
        let extra: Vec<&[u8]> = tags.iter().map(|t| t.as_bytes()).collect();
        if self
            .run_or_dirty(host, "tags", &self.keys.tags, &field, &extra, w)
            .is_ok()
        {
            for t in tags {
                host.note(Noted::Tag(t), w);
            }
        }
        let tags: Vec<Vec<u8>> = tags.iter().map(|t| t.as_bytes().to_vec()).collect();
        let _ = host.cache.invalidate_tags(&tags);
    }

    /// Voids every value in Redis and tells every host to clear.
    pub fn publish_clear(&self, host: Host<'_>) -> Result<(), NotDone> {
        self.clear_everywhere(host, "clear").map(|_| ())
    }

    /// After writes were kept on this host: raises the host's fence (writes
    /// it sent before, which may still run on the server, are refused from
    /// now on), then voids every value in Redis and tells every host to
    /// clear, this one included.
    pub fn recover(&self, host: Host<'_>) -> Result<(), NotDone> {
        host.bump(words::FENCE, 1);
        self.clear_everywhere(host, "recover")?;
        let _ = host.cache.clear();
        host.bump(words::GAP_CLEARS, 1);
        Ok(())
    }

    /// The clear of every value in Redis, `op` "clear" or "recover"; its
    /// write time is noted as the host's latest clear.
    fn clear_everywhere(&self, host: Host<'_>, op: &str) -> Result<(), NotDone> {
        let w = self.clock(host);
        self.run(
            host,
            op,
            &self.keys.tags,
            &tags_field(&[ALL]),
            &[ALL.as_bytes()],
            w,
        )?;
        host.cleared(w);
        Ok(())
    }

    /// `clear` for the whole cluster: every value in Redis is voided too.
    pub fn clear(&self, host: Host<'_>) {
        if self.publish_clear(host).is_err() {
            self.dirty(host);
        }
        let _ = host.cache.clear();
    }
}

/// A write's own arguments followed by its tags and the tag every value
/// carries, as the write script reads them.
pub(crate) fn with_tags<'a>(mut head: Vec<&'a [u8]>, tags: &[&'a str]) -> Vec<&'a [u8]> {
    head.extend(tags.iter().map(|t| t.as_bytes()));
    head.push(ALL.as_bytes());
    head
}
