//! What a read below L1 hands to JavaScript: the value (JSON text, bytes or
//! a counter, see `codec`) as the call's result, and beside it, in the
//! thread's meta words (`words::meta`), what was found and the words an L1
//! entry of it watches. Words, not an object: a JavaScript object made per
//! read would cost more than the read itself.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::{BigInt, Buffer, Either, Either4, Function, Unknown};
use napi::Env;
use napi_derive::napi;
use ziggurat_cache::{
    Bytes, Cache, Error, Found, Front, L1Watch, Payload, Read, Trailer, ValueCode, Watch32,
};

use crate::codec::{decode, view, Decoded, View};
use crate::errors::{invalid, to_napi, wait_err};
use crate::words::{
    bare_function, found, input, keep, keep_negative, meta, nothing_kept, with_scratch, BareCall,
    Regions, ScratchText,
};

/// A value as JavaScript receives it: JSON text, bytes, a counter within
/// 2^53, or one beyond it; None for nothing.
pub type Out = Option<Either4<String, Buffer, f64, BigInt>>;

/// A decoded value as JavaScript receives it, and its code (meta word 0).
pub(crate) fn js(data: Decoded) -> (ValueCode, Either4<String, Buffer, f64, BigInt>) {
    match data {
        Decoded::Json(s) => (ValueCode::JsonText, Either4::A(s)),
        Decoded::Bytes(b) => (ValueCode::Bytes, Either4::B(b.into())),
        Decoded::Raw(b) => (ValueCode::Raw, Either4::B(b.into())),
        Decoded::Int(n) => (ValueCode::Counter, int_out(n)),
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
        let (code, v) = js(self.data);
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
    read_with(c, k, &mut f)
}

/// Reads `key` below L1 in `c` through `front`: its value; for a cached
/// miss or nothing, None and the meta words saying which.
fn read_with<F: Front<Error = napi::Error>>(
    c: &Cache,
    k: &[u8],
    front: &mut F,
) -> napi::Result<Option<F::Value>> {
    ziggurat_cache::check_key(k).map_err(to_napi)?;
    c.counts().l1_misses.bump();
    Ok(match c.read(k, None, false, front)? {
        Read::Fresh(v, _) => Some(v),
        // The meta words say it (the front's `negative`).
        Read::Negative(_) => None,
        _ => {
            found(ValueCode::Nothing);
            None
        }
    })
}

/// What a read of a string key needs of its cache, kept in this thread's
/// registry under a slot that the JavaScript `Cache` writes in the input
/// block before `readInput()`: a call without arguments skips what napi-rs
/// does for each argument and for a method's instance (unwrapping it,
/// registering a borrow of it), the larger part of a read's cost outside the
/// engine. It holds the cache itself, not a weak reference that each read
/// would upgrade (two atomic read-modify-writes per read): `close()` frees
/// the slot, and so does the `NativeCache` of a cache dropped unclosed.
struct Reader {
    cache: Arc<Cache>,
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
    regions: Option<Regions>,
    foreign: &Arc<AtomicU64>,
    raw: bool,
) -> u32 {
    let r = Reader {
        cache: Arc::clone(cache),
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

/// Frees `slot` if it still holds `cache`'s reader (a cache dropped
/// without `close()`); nothing once the thread's registry is gone.
pub fn forget_reader_of(slot: u32, cache: &Arc<Cache>) {
    let _ = READERS.try_with(|rs| {
        if let Some(r) = rs.borrow_mut().get_mut(slot as usize) {
            if r.as_ref().is_some_and(|r| Arc::ptr_eq(&r.cache, cache)) {
                *r = None;
            }
        }
    });
}

/// Reads the key in this thread's input block below L1, through the reader
/// in the slot it names: the value, the meta words saying what it is. The
/// payload is copied into the thread's scratch and from there into the
/// JavaScript value (JSON text in ASCII as a one-byte string, which V8
/// copies without decoding).
fn read_input() -> napi::Result<Either<ScratchText, Out>> {
    with_scratch(|key, payload| {
        let slot = input(key).ok_or_else(|| invalid("the key is longer than 4096 bytes"))?;
        let got = READERS.with(|rs| {
            let rs = rs.borrow();
            let r = rs
                .get(slot as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| invalid(format!("no cache reads through slot {slot}")))?;
            let mut f = ScratchFront {
                foreign: &r.foreign,
                regions: r.regions.as_ref(),
                raw: r.raw,
                payload,
            };
            read_with(&r.cache, key, &mut f)
        })?;
        // `ScratchFront::fresh` wrote the other meta words.
        let said = |code: ValueCode| meta()[0].store(code as u32, Ordering::Relaxed);
        Ok(match got {
            None => Either::B(None),
            Some(Taken::Text(text)) => {
                said(ValueCode::JsonText);
                Either::A(text)
            }
            Some(Taken::Owned(data)) => {
                let (code, v) = js(data);
                said(code);
                Either::B(Some(v))
            }
        })
    })
}

/// `readInput()` (see `read_input`) as a bare Node-API function.
#[napi(ts_return_type = "() => string | Buffer | number | bigint | null")]
pub fn read_input_function(env: &Env) -> napi::Result<Function<'_, (), Unknown<'_>>> {
    bare_function::<ReadInput>(env, "readInput")
}

/// The call of `readInput()`.
struct ReadInput;

impl BareCall for ReadInput {
    type Value = Either<ScratchText, Out>;

    fn call() -> napi::Result<Self::Value> {
        read_input()
    }
}

/// The front end's side of `readInput()`: the payload copied into the
/// thread's scratch (a read that starts again overwrites it), taken when
/// `view` reads it; values it cannot read are counted as foreign.
struct ScratchFront<'a> {
    foreign: &'a AtomicU64,
    regions: Option<&'a Regions>,
    raw: bool,
    payload: &'a mut Vec<u8>,
}

/// What `readInput()` took of a value: JSON text left in the scratch (the
/// common case), or the value copied out of it (bytes, a counter). What an
/// L1 entry of it watches goes to the meta words as it is found, not through
/// the engine's return values (large ones: each move of them costs a read).
enum Taken {
    Text(ScratchText),
    Owned(Decoded),
}

impl Payload for ScratchFront<'_> {
    type Out = ();

    fn copied(&mut self, bytes: &[u8]) {
        self.payload.clear();
        self.payload.extend_from_slice(bytes);
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) {
        self.payload.clear();
        self.payload.resize(len, 0);
        write(self.payload);
    }
}

impl Front for ScratchFront<'_> {
    type Value = Taken;
    type Error = napi::Error;

    fn l1(&mut self) -> Result<Option<Option<Taken>>, napi::Error> {
        // The L1 is JavaScript's, asked before any call into the addon.
        Ok(None)
    }

    fn fresh(&mut self, found: Found<()>) -> Result<Option<Taken>, napi::Error> {
        let t = found.trailer;
        let taken = match view(t.kind, self.payload, self.raw) {
            Some(View::Ascii) => Taken::Text(ScratchText::Ascii),
            Some(View::Utf8) => Taken::Text(ScratchText::Utf8),
            Some(View::Bytes(b)) => Taken::Owned(Decoded::Bytes(b.to_vec())),
            Some(View::Raw(b)) => Taken::Owned(Decoded::Raw(b.to_vec())),
            Some(View::Int(n)) => Taken::Owned(Decoded::Int(n)),
            None => {
                self.foreign.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
        };
        match (found.keep, self.regions) {
            (Some(w), Some(r)) => keep(r, &w, &found.tags, &t),
            _ => nothing_kept(),
        }
        Ok(Some(taken))
    }

    fn stale(&mut self, _found: Found<()>) -> Option<Taken> {
        // Never asked: readInput() reads without allowing a stale value.
        None
    }

    fn negative(&mut self, f: Found<()>) {
        cached_miss(&f, self.regions);
    }

    fn error(&mut self, e: Error) -> napi::Error {
        to_napi(e)
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
    /// The key waited for, which a load timeout names (empty: none).
    pub key: &'a [u8],
}

/// A cached miss found: the meta words say so and what an L1 entry of it
/// watches (the key's main stamp, the epoch, and its tags' words in the
/// cached-miss segment's tag table).
fn cached_miss(f: &Found<()>, regions: Option<&Regions>) {
    found(ValueCode::Negative);
    if let (Some(w), Some(r)) = (&f.keep, regions) {
        keep_negative(r, w, &f.tags, &f.trailer);
    }
}

/// Payloads as vectors: the Cache's own `Bytes`.
impl Payload for NodeFront<'_> {
    type Out = Vec<u8>;

    fn copied(&mut self, bytes: &[u8]) -> Vec<u8> {
        Bytes.copied(bytes)
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Vec<u8> {
        Bytes.written(len, write)
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
        cached_miss(&f, self.regions);
    }

    fn error(&mut self, e: Error) -> napi::Error {
        wait_err(self.key, e)
    }
}
