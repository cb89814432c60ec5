//! The mapped words a JavaScript L1 validates its hits against (the keys'
//! stamps, the tags' versions, the segment epoch), as array buffers over the
//! mapping itself, so that a hit is checked with `Atomics.load` and no call
//! into the addon. This is the addon's only `unsafe` code.
//!
//! JavaScript never writes through these buffers: the package only loads
//! from them, and keeps them in private fields no other code can reach.
//!
//! Beside them, two blocks of the addon's own memory, shown the same way:
//! a clock, the engine's `now_ms()` (the clock of the entries' soft
//! deadlines) stored by a thread of the addon every millisecond, so that an
//! L1 entry's deadline is checked with atomic loads rather than a call to
//! `performance.now()`, several times dearer, and against the entry's own
//! deadline, not one converted to another clock; and each thread's meta
//! block, where a call says what it found beside its result; and each
//! thread's input block, the one buffer JavaScript writes: the key of a read
//! and the cache it reads, put there before a call that takes no argument
//! (a call with arguments costs napi-rs more than the read itself).
//!
//! And that read's own Node-API glue: the call itself, a bare Node-API
//! function, and the value it returns, JSON text made into a JavaScript
//! string straight from the thread's scratch, where the read copied it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

use napi::bindgen_prelude::{ArrayBuffer, Function, JsError, ToNapiValue, Unknown};
use napi::{sys, Env, Result};
use napi_derive::napi;
use ziggurat_core::{now_ms, Segment};

/// Words of the meta block (see `front`).
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

/// This thread's meta block as an array buffer; None when the runtime
/// refuses external buffers.
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

/// This thread's input block as an array buffer; None when the runtime
/// refuses external buffers.
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

/// `readInput()` (see `front::read_input`) as a bare Node-API function:
/// the binding's own glue around a call (its records of borrowed objects,
/// which a call with no argument and no object has none of) would cost a
/// read as much as its copy of the key.
#[napi(ts_return_type = "() => string | Buffer | number | bigint | null")]
pub fn read_input_function(env: &Env) -> Result<Function<'_, (), Unknown<'_>>> {
    env.create_function("readInput", read_input_callback)
}

/// The Node-API callback of `readInput()`: its value, or its error thrown.
unsafe extern "C" fn read_input_callback(
    env: sys::napi_env,
    _info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: Node.js calls this on the thread of `env`, the live env of the
    // call, as the generated glue of a #[napi] function is called; the value
    // is made, or the error thrown, in that env before the call returns. The
    // call takes no argument and no object, so no JavaScript value is
    // borrowed, and it calls no JavaScript (no re-entry).
    unsafe {
        crate::front::read_input()
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

/// The clock block as an array buffer (see `Clock`), the clock thread
/// started on the first call; None when the runtime refuses external
/// buffers.
pub fn clock<'env>(env: &'env Env) -> Result<Option<ArrayBuffer<'env>>> {
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

/// An array buffer over `len` bytes at `ptr`, which stay mapped and are only
/// loaded from; None when the runtime would copy them instead.
fn external<'env>(env: &'env Env, ptr: *const u8, len: usize) -> Result<Option<ArrayBuffer<'env>>> {
    // SAFETY: every caller passes a region that stays readable for the rest of
    // the process: the clock block (a static), a thread's meta block (leaked, so
    // never freed) or a region of a segment's mapping (the stamp table, the tag
    // table, the 8-byte epoch: `Regions::of`), which the engine never unmaps (it
    // swaps zero pages in at the same addresses when the segment is dropped;
    // the cached-miss segment's tag table likewise).
    // So the region outlives any buffer over it, and the finalizer has nothing
    // to free. JavaScript only loads from these buffers but one, a thread's
    // input block (leaked too), which the package's JavaScript writes on that
    // thread between calls, and which the addon loads with atomics during a
    // call on the same thread: the two never overlap. The others change under
    // JavaScript only through atomics of their owners (other processes'
    // writes, the clock thread, this addon's calls, which end before
    // JavaScript runs on the thread again). The words are aligned for the
    // typed arrays put over them (4 bytes for the tables and the meta and
    // input blocks, 8 for the epoch and the clock).
    let ab = unsafe { ArrayBuffer::from_external(env, ptr as *mut u8, len, (), |_, _| ()) }?;
    Ok((ab.as_ptr() == ptr).then_some(ab))
}

/// Where the regions an L1 watches start in this process's mapping, and
/// their lengths in bytes.
#[derive(Clone, Copy)]
pub struct Regions {
    stamps: *const u8,
    nstamps: usize,
    tags: *const u8,
    ntags: usize,
    epoch: *const u8,
    /// The cached-miss segment's tag table: a cached miss's tags are its own.
    neg_tags: *const u8,
    neg_ntags: usize,
}

impl Regions {
    /// The regions of `main`, and the tag table of its cached-miss segment
    /// `neg`, found from the handles the engine gives out for single words
    /// (`stamp_watch`, `tag_watch`, `epoch_watch`), which stay mapped for the
    /// rest of the process even once the segment is dropped (the engine then
    /// swaps zero pages in at the same addresses).
    pub fn of(main: &Segment, neg: &Segment) -> Regions {
        let g = main.geometry();
        let kh = main.hash(b"\0");
        let idx = main.stamp_index(&kh) as usize;
        let one = main.stamp_watch(&kh).as_ptr() as *const u8;
        Regions {
            stamps: one.wrapping_sub(4 * idx),
            nstamps: g.nstamps() as usize,
            tags: main.tag_watch(0).as_ptr() as *const u8,
            ntags: g.ntags() as usize,
            epoch: main.epoch_watch().as_ptr() as *const u8,
            neg_tags: neg.tag_watch(0).as_ptr() as *const u8,
            neg_ntags: neg.geometry().ntags() as usize,
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

    /// The stamp table, the tag table, the epoch and the cached-miss
    /// segment's tag table as array buffers over the mapping; None when the
    /// runtime refuses external buffers (it would copy the words, and a copy
    /// never moves: the caller then keeps no L1).
    pub fn buffers<'env>(&self, env: &'env Env) -> Result<Option<[ArrayBuffer<'env>; 4]>> {
        let stamps = external(env, self.stamps, 4 * self.nstamps)?;
        let tags = external(env, self.tags, 4 * self.ntags)?;
        let epoch = external(env, self.epoch, 8)?;
        let neg_tags = external(env, self.neg_tags, 4 * self.neg_ntags)?;
        Ok(match (stamps, tags, epoch, neg_tags) {
            (Some(s), Some(t), Some(e), Some(n)) => Some([s, t, e, n]),
            _ => None,
        })
    }
}
