//! The mapped words a JavaScript L1 validates its hits against (the keys'
//! stamps, the tags' versions, the segment epoch), as array buffers over a
//! read-only second mapping of the file (`ReadOnlyView`), so that a hit is
//! checked with `Atomics.load` and no call into the addon. This is the
//! addon's only `unsafe` code.
//!
//! The package only loads from these buffers, and keeps them where no other
//! code reaches them; but JavaScript cannot be kept from storing into an
//! array buffer it holds, so the mapping behind them is read-only: a stray
//! store faults (the process dies of SIGSEGV) rather than change words that
//! every process of the host trusts. Once the cache is closed, the view is
//! swapped for private zero pages, which take stores: from then on a store
//! through an old buffer lands in this process's own memory and changes
//! nothing, and never kills the process.
//!
//! Beside them, two blocks of the addon's own memory, shown the same way:
//! a clock, the engine's `now_ms()` (the clock of the entries' soft
//! deadlines) stored by a thread of the addon every millisecond, so that an
//! L1 entry's deadline is checked with atomic loads rather than a call to
//! `performance.now()`, several times dearer, and against the entry's own
//! deadline, not one converted to another clock; and each thread's meta
//! block, where a call says what it found beside its result (the words'
//! layout and the calls that write them, `found` and `keep`, are here); and each
//! thread's input block, the one buffer JavaScript writes: the key of a read
//! and the cache it reads, put there before a call that takes no argument
//! (a call with arguments costs napi-rs more than the read itself).
//!
//! And that read's own Node-API glue: the call made a bare Node-API
//! function (`bare_function`, for `front`'s `readInput()`), and the value it
//! returns, JSON text made into a JavaScript string straight from the
//! thread's scratch, where the read copied it. This file uses no other
//! module of the addon, so the arrows between them run one way.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use napi::bindgen_prelude::{ArrayBuffer, Function, JsError, ToNapiValue, Unknown};
use napi::{sys, Env, Result};
use napi_derive::napi;
use ziggurat_cache::{L1Watch, Trailer, ValueCode, Watch32};
use ziggurat_core::{now_ms, ReadOnlyView, Segment};

/// Words of the meta block (see `keep`).
pub const META_LEN: usize = 32;

thread_local! {
    /// This thread's meta block: what the last call found, beside its result.
    /// One per thread, as each thread runs its own JavaScript (worker threads);
    /// made once and kept for the life of the process, as the buffer over it is.
    static META: &'static [AtomicU32; META_LEN] =
        Box::leak(Box::new([const { AtomicU32::new(0) }; META_LEN]));
}

/// This thread's meta block.
pub fn meta() -> &'static [AtomicU32; META_LEN] {
    META.with(|m| *m)
}

/// Meta words: 0 what was found (a `ValueCode`), 1 whether an L1 may keep it, 2 the index of
/// the key's stamp, 3 its value, 4 and 5 the epoch (low, high), 6 and 7 the
/// soft deadline in ms of the engine's clock (low, high; both 0: never), 8
/// the number of tags, then each tag's cell and version.
const KEPT: usize = 1;
const TAGS: usize = 8;

/// Says in the meta words that the call found `code`, with nothing to keep.
pub fn found(code: ValueCode) {
    let m = meta();
    m[0].store(code as u32, Ordering::Relaxed);
    m[KEPT].store(0, Ordering::Relaxed);
}

/// Says in the meta words that an L1 may keep nothing of the value.
pub fn nothing_kept() {
    meta()[KEPT].store(0, Ordering::Relaxed);
}

/// Says in the meta words what an L1 entry of the value watches.
pub fn keep(r: &Regions, w: &L1Watch, tags: &[Watch32], t: &Trailer) {
    keep_watching(r, w, tags, t, false);
}

/// As `keep`, for a cached miss: its tags are words of the cached-miss
/// segment's tag table (the fourth buffer of `words()`).
pub fn keep_negative(r: &Regions, w: &L1Watch, tags: &[Watch32], t: &Trailer) {
    keep_watching(r, w, tags, t, true);
}

fn keep_watching(r: &Regions, w: &L1Watch, tags: &[Watch32], t: &Trailer, neg: bool) {
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
            r.tag_index(tag.word.as_ptr() as *const u32, neg),
        );
        put(TAGS + 2 + 2 * i, tag.seen);
    }
}

/// This thread's meta words (what each call found, beside its result) as an
/// array buffer; null when the runtime refuses external buffers.
#[napi]
pub fn meta_buffer(env: &Env) -> Result<Option<ArrayBuffer<'_>>> {
    external(env, meta().as_ptr() as *const u8, 4 * META_LEN)
}

/// Words of the input block: 0 the reader's slot, 1 the key's length in
/// bytes, then the key (at most 4096 bytes).
pub const INPUT_LEN: usize = 2 + 4096 / 4;

thread_local! {
    /// This thread's input block, made once and kept for the life of the
    /// process, as the buffer over it is.
    static INPUT: &'static [AtomicU32; INPUT_LEN] =
        Box::leak(Box::new([const { AtomicU32::new(0) }; INPUT_LEN]));
}

/// The reader's slot and the key that JavaScript put in this thread's input
/// block (the key copied out, into `key`); None for a length beyond the block.
pub fn input(key: &mut Vec<u8>) -> Option<u32> {
    let w = INPUT.with(|m| *m);
    let n = w[1].load(Ordering::Relaxed) as usize;
    if n > 4 * (INPUT_LEN - 2) {
        return None;
    }
    key.clear();
    for word in &w[2..2 + n.div_ceil(4)] {
        key.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
    key.truncate(n);
    Some(w[0].load(Ordering::Relaxed))
}

/// This thread's input block (a read's slot and key) as an array buffer;
/// null when the runtime refuses external buffers.
#[napi]
pub fn input_buffer(env: &Env) -> Result<Option<ArrayBuffer<'_>>> {
    let w = INPUT.with(|m| *m);
    external(env, w.as_ptr() as *const u8, 4 * INPUT_LEN)
}

thread_local! {
    /// This thread's scratch of `readInput()`: the key and the payload
    /// copied out of the segment, in vectors that every read reuses, so that
    /// a read allocates nothing in Rust.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> =
        RefCell::new((Vec::with_capacity(64), Vec::with_capacity(1024)));
}

/// Runs `f` on this thread's scratch (the key, the payload).
pub fn with_scratch<R>(f: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> R) -> R {
    SCRATCH.with(|s| {
        let (key, payload) = &mut *s.borrow_mut();
        f(key, payload)
    })
}

/// The JSON text in this thread's scratch payload, which becomes a
/// JavaScript string as the call that returns it ends, copied once, by V8:
/// no copy in Rust on the way.
pub enum ScratchText {
    /// ASCII: a string of one byte per character, copied without decoding.
    Ascii,
    /// UTF-8 with characters beyond ASCII (checked as the value was read).
    Utf8,
}

impl ToNapiValue for ScratchText {
    // SAFETY (of the implementation): napi-rs calls this as the callback that
    // returned the value ends, with that callback's env, on its thread, the
    // thread whose scratch holds the text.
    unsafe fn to_napi_value(env: sys::napi_env, text: ScratchText) -> Result<sys::napi_value> {
        with_scratch(|_, payload| {
            let mut out = std::ptr::null_mut();
            let (ptr, len) = (payload.as_ptr().cast(), payload.len() as isize);
            // SAFETY: `env` is the live env of this call (above); the bytes are
            // the scratch's own, borrowed for the call, whose length fits an
            // isize (a payload is at most a segment's slab), and are what the
            // variant says (ASCII, or UTF-8); V8 copies them before it returns
            // and keeps no pointer to them.
            let status = unsafe {
                match text {
                    ScratchText::Ascii => sys::napi_create_string_latin1(env, ptr, len, &mut out),
                    ScratchText::Utf8 => sys::napi_create_string_utf8(env, ptr, len, &mut out),
                }
            };
            if status == sys::Status::napi_ok {
                Ok(out)
            } else {
                Err(napi::Error::new(
                    napi::Status::from(status),
                    "cannot make a string of the value read",
                ))
            }
        })
    }
}

/// A call of no arguments made a bare Node-API function by
/// `bare_function`: what it returns, or the error it throws.
pub trait BareCall {
    /// The value the call returns to JavaScript.
    type Value: ToNapiValue;
    /// Runs the call on the thread of the env it is called in.
    fn call() -> Result<Self::Value>;
}

/// `C` as a bare Node-API function named `name`: the binding's own glue
/// around a call (its records of borrowed objects, which a call with no
/// argument and no object has none of) would cost a read as much as its
/// copy of the key.
pub fn bare_function<'env, C: BareCall>(
    env: &'env Env,
    name: &str,
) -> Result<Function<'env, (), Unknown<'env>>> {
    env.create_function(name, bare_callback::<C>)
}

/// The Node-API callback of a `BareCall`: its value, or its error thrown.
unsafe extern "C" fn bare_callback<C: BareCall>(
    env: sys::napi_env,
    _info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: Node.js calls this on the thread of `env`, the live env of the
    // call, as the generated glue of a #[napi] function is called; the value
    // is made, or the error thrown, in that env before the call returns. The
    // call takes no argument and no object, so no JavaScript value is
    // borrowed, and it calls no JavaScript (no re-entry).
    unsafe {
        C::call()
            .and_then(|v| ToNapiValue::to_napi_value(env, v))
            .unwrap_or_else(|e| {
                JsError::from(e).throw_into(env);
                std::ptr::null_mut()
            })
    }
}

/// The process's clock block, kept current by the clock thread: `now_ms()`
/// (two 32-bit halves, low first), then the same time as one 32-bit word,
/// the ms since `base` (saturated at `u32::MAX`, about 49.7 days after the
/// clock started), then `base` (two halves). An L1 hit of an entry whose
/// deadline falls within the short word's range checks it with one
/// `Atomics.load` instead of two: each costs a call in V8, the larger part
/// of a hit.
#[repr(C, align(8))]
struct Clock {
    now: AtomicU64,
    short: AtomicU32,
    base_lo: AtomicU32,
    base_hi: AtomicU32,
    _pad: AtomicU32,
}

static CLOCK: Clock = Clock {
    now: AtomicU64::new(0),
    short: AtomicU32::new(0),
    base_lo: AtomicU32::new(0),
    base_hi: AtomicU32::new(0),
    _pad: AtomicU32::new(0),
};
static TICKING: Once = Once::new();
/// How often the clock thread stores the time.
const TICK: Duration = Duration::from_millis(1);

/// Stores `now` in the clock block, both ways.
fn tick(now: u64, base: u64) {
    let short = now.saturating_sub(base).min(u64::from(u32::MAX)) as u32;
    CLOCK.now.store(now, Ordering::Release);
    CLOCK.short.store(short, Ordering::Release);
}

/// The engine's clock block as an array buffer (see `Clock`) that a thread of
/// the addon keeps current, the thread started on the first call; null when
/// the runtime refuses external buffers. One per process: the package asks
/// once.
#[napi]
pub fn clock_buffer(env: &Env) -> Result<Option<ArrayBuffer<'_>>> {
    TICKING.call_once(|| {
        let base = now_ms();
        CLOCK.base_lo.store(base as u32, Ordering::Release);
        CLOCK.base_hi.store((base >> 32) as u32, Ordering::Release);
        tick(base, base);
        // A thread that only sleeps and stores: it never keeps the process alive.
        let _ = std::thread::Builder::new()
            .name("ziggurat-clock".into())
            .spawn(move || loop {
                std::thread::sleep(TICK);
                tick(now_ms(), base);
            });
    });
    external(
        env,
        &CLOCK as *const Clock as *const u8,
        std::mem::size_of::<Clock>(),
    )
}

/// An array buffer over `len` bytes at `ptr`, which stay readable for the
/// rest of the process; None when the runtime would copy them instead.
fn external<'env>(env: &'env Env, ptr: *const u8, len: usize) -> Result<Option<ArrayBuffer<'env>>> {
    external_holding(env, ptr, len, ())
}

/// An array buffer over `len` bytes at `ptr`, which stay readable while
/// `hold` lives: the buffer keeps it until the runtime collects it. None
/// when the runtime would copy the bytes instead.
fn external_holding<'env, T: 'env>(
    env: &'env Env,
    ptr: *const u8,
    len: usize,
    hold: T,
) -> Result<Option<ArrayBuffer<'env>>> {
    // SAFETY: every caller passes a region that stays readable as long as
    // `hold` does, and `hold` is dropped only by the finalizer, once the
    // runtime has collected the buffer (or, when it copies the bytes, once
    // the copy is made): the clock block (a static), a thread's meta or input
    // block (leaked, so never freed), or a region of a segment's read-only
    // view, which `hold` (an `Arc` of the view) keeps mapped. A view is
    // retired as its cache closes: swapped for private zero pages at the same
    // addresses, which stay readable (and writable). So the region outlives
    // any buffer over it, and the finalizer has nothing to free but `hold`.
    // JavaScript only loads from these buffers but one, a thread's input block,
    // which the package's JavaScript writes on that thread between calls, and
    // which the addon loads with atomics during a call on the same thread: the
    // two never overlap. A store into a view while its cache is open faults
    // (read-only pages): the process dies rather than Rust seeing memory
    // change under it, and no other process sees the store. The others change
    // under JavaScript only through atomics of their owners (other processes'
    // writes, the clock thread, this addon's calls, which end before
    // JavaScript runs on the thread again). The words are aligned for the
    // typed arrays put over them (4 bytes for the tables and the meta and
    // input blocks, 8 for the epoch and the clock: a view starts on a page).
    let ab = unsafe { ArrayBuffer::from_external(env, ptr as *mut u8, len, hold, |_, h| drop(h)) }?;
    Ok((ab.as_ptr() == ptr).then_some(ab))
}

/// The read-only views an L1's array buffers are made over: the main
/// segment's (its stamp table, tag table and epoch) and the cached-miss
/// segment's (its tag table: a cached miss's tags are its own).
pub struct Views {
    main: Arc<ReadOnlyView>,
    neg: Arc<ReadOnlyView>,
    stamps: (usize, usize),
    tags: (usize, usize),
    neg_tags: (usize, usize),
}

impl Views {
    /// The views of `main` and `neg`; None when they cannot be mapped (the
    /// cache then keeps no L1).
    pub fn of(main: &Segment, neg: &Segment) -> Option<Views> {
        let (g, ng) = (main.geometry(), neg.geometry());
        Some(Views {
            main: Arc::new(main.words_view().ok()?),
            neg: Arc::new(neg.words_view().ok()?),
            stamps: (g.stamps_off() as usize, 4 * g.nstamps() as usize),
            tags: (g.tags_off() as usize, 4 * g.ntags() as usize),
            neg_tags: (ng.tags_off() as usize, 4 * ng.ntags() as usize),
        })
    }

    /// The stamp table, the tag table, the epoch and the cached-miss
    /// segment's tag table as array buffers over the views; None when the
    /// runtime refuses external buffers (it would copy the words, and a copy
    /// never moves: the caller then keeps no L1).
    pub fn buffers<'env>(&self, env: &'env Env) -> Result<Option<[ArrayBuffer<'env>; 4]>> {
        let over = |view: &Arc<ReadOnlyView>,
                    (off, len): (usize, usize)|
         -> Result<Option<ArrayBuffer<'env>>> {
            match view.at(off, len) {
                Some(p) => external_holding(env, p, len, view.clone()),
                None => Ok(None),
            }
        };
        let stamps = over(&self.main, self.stamps)?;
        let tags = over(&self.main, self.tags)?;
        let epoch = over(&self.main, (Segment::EPOCH_OFFSET, 8))?;
        let neg_tags = over(&self.neg, self.neg_tags)?;
        Ok(match (stamps, tags, epoch, neg_tags) {
            (Some(s), Some(t), Some(e), Some(n)) => Some([s, t, e, n]),
            _ => None,
        })
    }

    /// Swaps both views for private zero pages (see `ReadOnlyView::retire`):
    /// the cache is closed, and its buffers read 0 from now on.
    pub fn retire(&self) {
        self.main.retire();
        self.neg.retire();
    }
}

/// Where the tables an L1 watches start in the engine's mapping: the engine
/// hands out handles on single words (`stamp_watch`, `tag_watch`), and
/// JavaScript names a word by its index in the table (of the views).
#[derive(Clone, Copy)]
pub struct Regions {
    stamps: *const u8,
    tags: *const u8,
    /// The cached-miss segment's tag table: a cached miss's tags are its own.
    neg_tags: *const u8,
}

impl Regions {
    /// The tables of `main`, and the tag table of its cached-miss segment
    /// `neg`, found from the engine's word handles (which stay mapped for the
    /// rest of the process, see `Word32`).
    pub fn of(main: &Segment, neg: &Segment) -> Regions {
        let kh = main.hash(b"\0");
        let idx = main.stamp_index(&kh) as usize;
        let one = main.stamp_watch(&kh).as_ptr() as *const u8;
        Regions {
            stamps: one.wrapping_sub(4 * idx),
            tags: main.tag_watch(0).as_ptr() as *const u8,
            neg_tags: neg.tag_watch(0).as_ptr() as *const u8,
        }
    }

    /// The index (in 32-bit words) of the word at `ptr` in the stamp table.
    pub fn stamp_index(&self, ptr: *const u32) -> u32 {
        ((ptr as usize - self.stamps as usize) / 4) as u32
    }

    /// The index of the word at `ptr` in the tag table (of the cached-miss
    /// segment if `neg`).
    pub fn tag_index(&self, ptr: *const u32, neg: bool) -> u32 {
        let table = if neg { self.neg_tags } else { self.tags };
        ((ptr as usize - table as usize) / 4) as u32
    }
}
