//! What a read below L1 hands to JavaScript: the value (JSON text, bytes or
//! a counter, see `codec`) as the call's result, and beside it, in the
//! thread's meta words (`words::meta`), what was found and the words an L1
//! entry of it watches. Words, not an object: a JavaScript object made per
//! read would cost more than the read itself.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use napi::bindgen_prelude::{BigInt, Buffer, Either, Either4, Latin1String};
use napi_derive::napi;
use ziggurat_cache::{Cache, Error, Found, Front, L1Watch, Payload, Read, Trailer, Watch32};

use crate::cache::NativeCache;
use crate::codec::{decode, Decoded};
use crate::errors::{closed, invalid, to_napi};
use crate::words::{input, meta, Regions};

/// A value as JavaScript receives it: JSON text, bytes, a counter within
/// 2^53, or one beyond it; None for nothing.
pub type Out = Option<Either4<String, Buffer, f64, BigInt>>;

/// What a call found (meta word 0).
pub const NOTHING: u32 = 0;
/// JSON text.
pub const JSON_TEXT: u32 = 1;
/// Bytes.
pub const BYTES: u32 = 2;
/// A counter.
pub const COUNTER: u32 = 3;
/// A cached miss.
pub const NEGATIVE: u32 = 4;
/// A value's bytes as JavaScript encoded them (a cache whose values are
/// encoded in JavaScript: serializer 'msgpack').
pub const RAW: u32 = 5;

/// Meta words: 0 what was found, 1 whether an L1 may keep it, 2 the index of
/// the key's stamp, 3 its value, 4 and 5 the epoch (low, high), 6 and 7 the
/// soft deadline in ms of the engine's clock (low, high; both 0: never), 8
/// the number of tags, then each tag's cell and version.
const KEPT: usize = 1;
const TAGS: usize = 8;

/// Says in the meta words that the call found `code`, with nothing to keep.
pub fn found(code: u32) {
    let m = meta();
    m[0].store(code, Ordering::Relaxed);
    m[KEPT].store(0, Ordering::Relaxed);
}

/// Says in the meta words what an L1 entry of the value watches.
pub fn keep(r: &Regions, w: &L1Watch, tags: &[Watch32], t: &Trailer) {
    let m = meta();
    let put = |i: usize, v: u32| m[i].store(v, Ordering::Relaxed);
    put(KEPT, 1);
    put(2, r.stamp_index(w.stamp.word.as_ptr() as *const u32));
    put(3, w.stamp.seen);
    put(4, w.epoch.seen as u32);
    put(5, (w.epoch.seen >> 32) as u32);
    put(6, t.soft as u32);
    put(7, (t.soft >> 32) as u32);
    put(TAGS, tags.len() as u32);
    for (i, tag) in tags.iter().enumerate() {
        put(
            TAGS + 1 + 2 * i,
            r.tag_index(tag.word.as_ptr() as *const u32),
        );
        put(TAGS + 2 + 2 * i, tag.seen);
    }
}

/// A value read below L1, still in Rust (a miss's stale value waits in it).
pub struct NodeValue {
    data: Decoded,
    keep: Option<(L1Watch, Vec<Watch32>, Trailer)>,
}

impl NodeValue {
    /// The value as JavaScript receives it; the meta words say what it is
    /// and, with `regions`, what an L1 entry of it watches.
    pub fn out(self, regions: Option<&Regions>) -> Out {
        let (code, v) = match self.data {
            Decoded::Json(s) => (JSON_TEXT, Either4::A(s)),
            Decoded::Bytes(b) => (BYTES, Either4::B(b.into())),
            Decoded::Raw(b) => (RAW, Either4::B(b.into())),
            Decoded::Int(n) => (COUNTER, int_out(n)),
        };
        found(code);
        if let (Some((w, tags, t)), Some(r)) = (&self.keep, regions) {
            keep(r, w, tags, t);
        }
        Some(v)
    }

    /// A copy (a miss's stale value is kept while a step hands it on).
    pub fn copy(&self) -> NodeValue {
        NodeValue {
            data: match &self.data {
                Decoded::Json(s) => Decoded::Json(s.clone()),
                Decoded::Bytes(b) => Decoded::Bytes(b.clone()),
                Decoded::Raw(b) => Decoded::Raw(b.clone()),
                Decoded::Int(n) => Decoded::Int(*n),
            },
            keep: None,
        }
    }
}

/// Reads `key` below L1 in `c` through `f`: the value, the meta words
/// saying what it is (the one read of every front end's call,
/// `NativeCache.read` and `readInput` alike).
pub fn read_below(c: &Cache, k: &[u8], mut f: NodeFront<'_>) -> napi::Result<Option<NodeValue>> {
    ziggurat_cache::check_key(k).map_err(to_napi)?;
    c.counts().l1_misses.bump();
    Ok(match c.read(k, None, false, &mut f)? {
        Read::Fresh(v, _) => Some(v),
        // The meta words say it (`NodeFront::negative`).
        Read::Negative(_) => None,
        _ => {
            found(NOTHING);
            None
        }
    })
}

/// What a read of a string key needs of its cache, kept in this thread's
/// registry under a slot that the JavaScript `Cache` writes in the input
/// block before `readInput()`: a call without arguments skips what napi-rs
/// does for each argument and for a method's instance (unwrapping it,
/// registering a borrow of it), the larger part of a read's cost outside the
/// engine. It holds the cache weakly: once `close()` drops the cache, a read
/// through it is refused.
struct Reader {
    cache: Weak<Cache>,
    name: String,
    regions: Option<Regions>,
    foreign: Arc<AtomicU64>,
    raw: bool,
}

thread_local! {
    /// This thread's readers by slot (JavaScript objects, and so the caches
    /// that register here, belong to one thread).
    static READERS: RefCell<Vec<Option<Reader>>> = const { RefCell::new(Vec::new()) };
}

/// Registers the reader of an open cache in this thread; its slot.
pub fn register(
    cache: &Arc<Cache>,
    name: &str,
    regions: Option<Regions>,
    foreign: &Arc<AtomicU64>,
    raw: bool,
) -> u32 {
    let r = Reader {
        cache: Arc::downgrade(cache),
        name: name.to_string(),
        regions,
        foreign: Arc::clone(foreign),
        raw,
    };
    READERS.with(|rs| {
        let mut rs = rs.borrow_mut();
        match rs.iter().position(Option::is_none) {
            Some(i) => {
                rs[i] = Some(r);
                i as u32
            }
            None => {
                rs.push(Some(r));
                (rs.len() - 1) as u32
            }
        }
    })
}

/// Frees the slot of a closed cache.
#[napi]
pub fn forget_reader(slot: u32) {
    READERS.with(|rs| {
        if let Some(r) = rs.borrow_mut().get_mut(slot as usize) {
            *r = None;
        }
    });
}

/// Reads the key in this thread's input block below L1, through the reader
/// in the slot it names: the value, the meta words saying what it is. JSON
/// text in ASCII (as short JSON text nearly always is) becomes a string of
/// one byte per character, which V8 copies without decoding UTF-8.
#[napi(ts_return_type = "string | Buffer | number | bigint | null")]
pub fn read_input() -> napi::Result<Either<Latin1String, Out>> {
    let mut key = Vec::with_capacity(64);
    let slot = input(&mut key).ok_or_else(|| invalid("the key is longer than 4096 bytes"))?;
    let (c, regions, foreign, raw) = READERS.with(|rs| {
        let rs = rs.borrow();
        let r = rs
            .get(slot as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| invalid(format!("no cache reads through slot {slot}")))?;
        let c = r.cache.upgrade().ok_or_else(|| closed(&r.name))?;
        Ok::<_, napi::Error>((c, r.regions, Arc::clone(&r.foreign), r.raw))
    })?;
    let f = NodeFront {
        foreign: &foreign,
        raw,
        regions: regions.as_ref(),
    };
    let Some(v) = read_below(&c, &key, f)? else {
        return Ok(Either::B(None));
    };
    match v.data {
        Decoded::Json(s) if s.is_ascii() => {
            found(JSON_TEXT);
            if let (Some((w, tags, t)), Some(r)) = (&v.keep, regions.as_ref()) {
                keep(r, w, tags, t);
            }
            Ok(Either::A(Latin1String::from(s)))
        }
        data => Ok(Either::B(
            NodeValue { data, keep: v.keep }.out(regions.as_ref()),
        )),
    }
}

/// A counter as JavaScript receives it: a number within 2^53, else a BigInt.
pub fn int_out(n: i64) -> Either4<String, Buffer, f64, BigInt> {
    const SAFE: i64 = (1 << 53) - 1;
    if (-SAFE..=SAFE).contains(&n) {
        Either4::C(n as f64)
    } else {
        Either4::D(BigInt::from(n))
    }
}

/// The front end's side of one read: payloads as vectors, decoded for
/// JavaScript; values it cannot read are counted as foreign.
pub struct NodeFront<'a> {
    /// Entries this process could not read (pickles of Python objects).
    pub foreign: &'a AtomicU64,
    /// The cache's values are encoded in JavaScript (`codec::decode`).
    pub raw: bool,
    /// The words of the caller's L1, which keeps cached misses too; None
    /// without one.
    pub regions: Option<&'a Regions>,
}

impl Payload for NodeFront<'_> {
    type Out = Vec<u8>;

    fn copied(&mut self, bytes: &[u8]) -> Vec<u8> {
        bytes.to_vec()
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Vec<u8> {
        let mut v = vec![0u8; len];
        write(&mut v);
        v
    }
}

impl NativeCache {
    /// The front end of one read of this cache.
    pub(crate) fn front(&self) -> NodeFront<'_> {
        NodeFront {
            foreign: &self.foreign,
            raw: self.raw,
            regions: self.regions.as_ref(),
        }
    }
}

impl NodeFront<'_> {
    fn value(&mut self, found: Found<Vec<u8>>, keep: bool) -> Option<NodeValue> {
        let t = found.trailer;
        let Some(data) = decode(t.kind, found.payload, self.raw) else {
            self.foreign.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let keep = if keep {
            found.keep.map(|w| (w, found.tags, t))
        } else {
            None
        };
        Some(NodeValue { data, keep })
    }
}

impl Front for NodeFront<'_> {
    type Value = NodeValue;
    type Error = napi::Error;

    fn l1(&mut self) -> Result<Option<Option<NodeValue>>, napi::Error> {
        // The L1 is JavaScript's, asked before any call into the addon.
        Ok(None)
    }

    fn fresh(&mut self, found: Found<Vec<u8>>) -> Result<Option<NodeValue>, napi::Error> {
        Ok(self.value(found, true))
    }

    fn stale(&mut self, found: Found<Vec<u8>>) -> Option<NodeValue> {
        self.value(found, false)
    }

    fn negative(&mut self, f: Found<()>) {
        // The meta words say what an L1 entry of the cached miss watches: the
        // key's main stamp and the epoch. One with tags is not kept: their
        // words are the cached-miss segment's, which the L1 does not map.
        found(NEGATIVE);
        if let (Some(w), Some(r), true) = (&f.keep, self.regions, f.tags.is_empty()) {
            keep(r, w, &[], &f.trailer);
        }
    }

    fn error(&mut self, e: Error) -> napi::Error {
        to_napi(e)
    }
}
