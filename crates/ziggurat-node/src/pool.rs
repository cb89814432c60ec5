//! The threads the cluster tier's calls run on, and the promises they
//! settle: a call that may wait on Redis (a read after a miss, a write, the
//! offer of a loaded value) never runs on the event loop, nor on libuv's
//! thread pool, whose four threads the process's file reads, DNS lookups and
//! zlib need. A thread is started when a call finds none idle, up to
//! `MAX_THREADS`; each keeps its own connection (the link's rule), and stays
//! for the next call.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

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

fn work() {
    let mut q = queue();
    loop {
        match q.jobs.pop_front() {
            Some(job) => {
                drop(q);
                job();
                q = queue();
            }
            None => {
                q.idle += 1;
                q = READY.wait(q).unwrap_or_else(PoisonError::into_inner);
                q.idle -= 1;
            }
        }
    }
}

/// Runs `job` on a thread of the pool; Err when no thread runs and none can
/// start (the process is at its limit).
fn submit(job: Job) -> Result<()> {
    let mut q = queue();
    if q.idle <= q.jobs.len() && q.threads < MAX_THREADS {
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
