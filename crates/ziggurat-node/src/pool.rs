//! The threads the cluster tier's calls run on, and the promises they
//! settle: a call that may wait on Redis (a read after a miss, a write, the
//! offer of a loaded value) never runs on the event loop, nor on libuv's
//! thread pool, whose four threads the process's file reads, DNS lookups and
//! zlib need. A thread is started when a call finds none idle, up to
//! `MAX_THREADS`; each keeps its own connection (the link's rule), and stays
//! for the next call.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, Result};

/// A call to run off the event loop.
type Job = Box<dyn FnOnce() + Send>;

/// Threads at most: calls beyond them queue (a call waits at most the
/// tier's timeout, a single-flight wait at most `loaderTimeout`).
const MAX_THREADS: usize = 16;

struct Queue {
    jobs: VecDeque<Job>,
    threads: usize,
    idle: usize,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    jobs: VecDeque::new(),
    threads: 0,
    idle: 0,
});
static READY: Condvar = Condvar::new();

fn queue() -> MutexGuard<'static, Queue> {
    // A panic while the queue was held left it whole (pushes and pops).
    QUEUE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How long an idle thread watches for the next call before it sleeps: the
/// calls of an awaited sequence (`await get`, then the next `await get`) come
/// a few tens of microseconds apart, and a thread asleep takes about as long
/// again to wake. One thread at a time watches; the others sleep at once.
const WATCH: Duration = Duration::from_micros(200);

/// Calls queued and not yet taken (read without the lock by the watcher).
static QUEUED: AtomicUsize = AtomicUsize::new(0);
/// Whether a thread watches for calls.
static WATCHING: AtomicBool = AtomicBool::new(false);

/// The next call, if one is queued.
fn take() -> Option<Job> {
    let job = queue().jobs.pop_front();
    if job.is_some() {
        QUEUED.fetch_sub(1, Ordering::AcqRel);
    }
    job
}

/// Watches for a call for `WATCH`, if no other thread does.
fn watch() -> Option<Job> {
    if WATCHING.swap(true, Ordering::AcqRel) {
        return None;
    }
    let until = Instant::now() + WATCH;
    let mut job = None;
    while job.is_none() && Instant::now() < until {
        if QUEUED.load(Ordering::Acquire) > 0 {
            job = take();
        } else {
            std::hint::spin_loop();
        }
    }
    WATCHING.store(false, Ordering::Release);
    job
}

fn work() {
    loop {
        if let Some(job) = take().or_else(watch) {
            job();
            continue;
        }
        let mut q = queue();
        q.idle += 1;
        while q.jobs.is_empty() {
            q = READY.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
        q.idle -= 1;
    }
}

/// Runs `job` on a thread of the pool; Err when no thread runs and none can
/// start (the process is at its limit).
fn submit(job: Job) -> Result<()> {
    let mut q = queue();
    let waiting = q.idle + usize::from(WATCHING.load(Ordering::Acquire));
    if waiting <= q.jobs.len() && q.threads < MAX_THREADS {
        let started = std::thread::Builder::new()
            .name("ziggurat-l3".into())
            .spawn(work);
        match started {
            Ok(_) => q.threads += 1,
            Err(e) if q.threads == 0 => {
                return Err(napi::Error::from_reason(format!(
                    "no thread could be started for a call to Redis: {e}"
                )))
            }
            Err(_) => {}
        }
    }
    q.jobs.push_back(job);
    QUEUED.fetch_add(1, Ordering::AcqRel);
    drop(q);
    READY.notify_one();
    Ok(())
}

/// A promise settled by `call`, run on a thread of the pool: its result is
/// made into a JavaScript value by `js`, on the event loop's thread.
pub fn promise<'e, R, T, F, J>(env: &'e Env, call: F, js: J) -> Result<Object<'e>>
where
    R: Send + 'static,
    T: ToNapiValue + 'static,
    F: FnOnce() -> Result<R> + Send + 'static,
    J: FnOnce(Env, R) -> Result<T> + Send + 'static,
{
    let (d, p) = env.create_deferred::<T, Box<dyn FnOnce(Env) -> Result<T> + Send>>()?;
    submit(Box::new(move || match call() {
        Ok(r) => d.resolve(Box::new(move |env| js(env, r))),
        Err(e) => d.reject(e),
    }))?;
    Ok(p)
}
