//! The connection to Redis or Valkey: short timeouts, no retries, and a
//! breaker that skips the server for a moment after it failed, so no request
//! waits on a server that is down or hung.
//!
//! A client library's defaults retry (redis-py: ten times, with a 5-second
//! socket timeout; one `GET` against a stopped server took about a minute)
//! or never time out. A cache must answer from the tiers it has instead, so
//! every call here is bounded by the link's timeout, and after a failure the
//! link answers [`Fault::Down`] at once for `retry_after` before it tries the
//! server again.
//!
//! Each thread keeps a connection of its own per link, in each process: a
//! child after `fork()` never writes on its parent's socket (it leaves the
//! inherited connection alone and connects anew), and the data path takes
//! no lock. A connection that fails half-way is dropped, so the next command
//! cannot read a stale reply; the next call connects again.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConnection};
use redis::{
    Client, Cmd, ConnectionInfo, ConnectionLike, ErrorKind, RedisError, TlsCertificates, Value,
};

use crate::server::{Address, Endpoint, Server};

/// Why a call did not give a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The server cannot be used now (unreachable, timed out, refused the
    /// login, or within `retry_after` of such a failure): the caller falls
    /// back to the host's tiers.
    Down {
        /// Whether the call timed out (else: it could not connect or the
        /// connection broke, or the breaker is open).
        timed_out: bool,
        /// What happened, for a log line.
        why: String,
    },
    /// The server answered an error (a script's refusal, out of memory, a
    /// read-only replica): the connection is sound.
    Reply(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Down { why, .. } => write!(f, "{why}"),
            Fault::Reply(text) => write!(f, "{text}"),
        }
    }
}

enum Conn {
    One(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

impl Conn {
    fn req(&mut self, cmd: &Cmd) -> redis::RedisResult<Value> {
        match self {
            Conn::One(c) => c.req_command(cmd),
            Conn::Cluster(c) => c.req_command(cmd),
        }
    }
}

/// A thread's connection of one link, in the process that made it.
struct Kept {
    link: Weak<()>,
    pid: u32,
    conn: Conn,
    used: Instant,
}

/// A connection idle longer than this is checked before it is used again
/// (a round trip more, once per idle spell).
const IDLE_CHECK: Duration = Duration::from_millis(200);

thread_local! {
    static KEPT: RefCell<Vec<Kept>> = const { RefCell::new(Vec::new()) };
}

fn clock() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Installs ring as rustls's provider once: the TLS client asks for the
/// process's default and has none of its own.
fn tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The connection to one cache's server.
///
/// ```
/// use std::time::Duration;
/// use ziggurat_cluster::{Endpoint, Fault, Link, Server};
/// let link = Link::new(Server::One(Endpoint::parse("redis://127.0.0.1:1/0").unwrap()), Duration::from_millis(50), Duration::from_secs(1)).unwrap();
/// assert!(matches!(link.query(&redis::cmd("PING")), Err(Fault::Down { .. })));
/// assert!(!link.up() && link.errors() == 1);
/// ```
pub struct Link {
    token: Arc<()>,
    infos: Vec<ConnectionInfo>,
    /// The certificates of `ssl_ca_certs`, read as the link is made.
    certs: Option<TlsCertificates>,
    /// The client (no connection: its settings).
    client: Clients,
    server: Server,
    timeout: Duration,
    retry_after: Duration,
    down_until: AtomicU64,
    up: AtomicBool,
    errors: AtomicU64,
    timeouts: AtomicU64,
}

impl Link {
    /// A link to `server`; each call waits at most `timeout`, and after a
    /// failure the server is left alone for `retry_after`. Nothing connects
    /// yet. The error says what of the server's settings the client refused.
    pub fn new(server: Server, timeout: Duration, retry_after: Duration) -> Result<Link, String> {
        let endpoints: Vec<&Endpoint> = match &server {
            Server::One(e) => vec![e],
            Server::Cluster(nodes) => nodes.iter().collect(),
        };
        if endpoints.is_empty() {
            return Err("a Redis Cluster needs at least one node".into());
        }
        if endpoints
            .iter()
            .any(|e| matches!(e.address, Address::Tcp { tls: true, .. }))
        {
            tls_provider();
        }
        let infos = endpoints
            .iter()
            .map(|e| e.connection_info())
            .collect::<Result<Vec<_>, _>>()?;
        let certs = match endpoints.iter().find_map(|e| e.ca.as_ref()) {
            Some(ca) => Some(TlsCertificates {
                client_tls: None,
                root_cert: Some(
                    std::fs::read(ca)
                        .map_err(|e| format!("cannot read ssl_ca_certs {}: {e}", ca.display()))?,
                ),
            }),
            None => None,
        };
        let client = match &server {
            Server::One(_) => {
                let info = infos[0].clone();
                let c = match &certs {
                    Some(certs) => Client::build_with_tls(info, certs.clone()),
                    None => Client::open(info),
                };
                Clients::One(c.map_err(|e| e.to_string())?)
            }
            Server::Cluster(_) => {
                let b = cluster_builder(&infos, &certs, timeout, timeout);
                Clients::Cluster(b.build().map_err(|e| e.to_string())?)
            }
        };
        Ok(Link {
            token: Arc::new(()),
            infos,
            certs,
            client,
            server,
            timeout,
            retry_after,
            down_until: AtomicU64::new(0),
            up: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        })
    }

    /// The server, as given.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The bound on each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the last call reached the server.
    pub fn up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Calls that failed for want of the server (timeouts aside).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Calls that timed out.
    pub fn timeouts(&self) -> u64 {
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Counts a failure the caller saw in a reply (a refused write): the
    /// server is up, but the tier could not use it.
    pub fn count_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the breaker is open: a call now answers [`Fault::Down`]
    /// without trying the server.
    pub fn resting(&self) -> bool {
        let until = self.down_until.load(Ordering::Relaxed);
        until != 0 && clock() < until
    }

    /// Records a call made on a connection of the caller's own: it failed
    /// (counted, and the breaker opens) or it reached the server.
    pub fn record(&self, outcome: Result<(), bool>) {
        match outcome {
            Ok(()) => self.reached(),
            Err(timed_out) => self.down(timed_out),
        }
    }

    /// A connection of its own, outside the thread's table, for one thread
    /// that blocks on the server (the stream reader): replies are waited for
    /// `read_timeout`, longer than the data path's bound. Connecting is
    /// bounded by the link's timeout; failures count and open the breaker as
    /// the data path's do.
    pub fn dedicated(&self, read_timeout: Duration) -> Result<Dedicated<'_>, Fault> {
        if self.resting() {
            return Err(Fault::Down {
                timed_out: false,
                why: "the server failed less than retry_after ago".into(),
            });
        }
        let conn = match &self.client {
            Clients::Cluster(_) => {
                cluster_builder(&self.infos, &self.certs, self.timeout, read_timeout)
                    .build()
                    .and_then(|c| c.get_connection())
                    .map(|c| Conn::Cluster(Box::new(c)))
            }
            Clients::One(one) => one.get_connection_with_timeout(self.timeout).and_then(|c| {
                c.set_read_timeout(Some(read_timeout))?;
                c.set_write_timeout(Some(self.timeout))?;
                Ok(Conn::One(c))
            }),
        };
        let conn = conn.map_err(|e| self.fail(&e))?;
        Ok(Dedicated {
            link: self,
            conn: Some(conn),
            pid: ziggurat_core::current_pid(),
        })
    }

    /// The server's reply to `cmd`, on this thread's connection.
    pub fn query(&self, cmd: &Cmd) -> Result<Value, Fault> {
        if self.resting() {
            return Err(Fault::Down {
                timed_out: false,
                why: "the server failed less than retry_after ago".into(),
            });
        }
        let pid = ziggurat_core::current_pid();
        let taken = KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            // Connections of links that are gone close here; those a parent
            // process made are never touched (its socket is the parent's).
            kept.retain(|k| k.link.strong_count() > 0);
            kept.iter()
                .position(|k| Weak::ptr_eq(&k.link, &Arc::downgrade(&self.token)))
                .map(|i| kept.swap_remove(i))
        });
        let mut conn = match taken {
            Some(mut k) if k.pid == pid => {
                if k.used.elapsed() < IDLE_CHECK || self.sound(&mut k.conn)? {
                    k.conn
                } else {
                    drop(k);
                    self.connect()?
                }
            }
            other => {
                if let Some(inherited) = other {
                    std::mem::forget(inherited.conn);
                }
                self.connect()?
            }
        };
        match conn.req(cmd) {
            Ok(Value::ServerError(e)) => {
                self.keep(conn, pid);
                self.reached();
                Err(Fault::Reply(said(&RedisError::from(e))))
            }
            Ok(v) => {
                self.keep(conn, pid);
                self.reached();
                Ok(v)
            }
            Err(e) if answered(&e) => {
                self.keep(conn, pid);
                self.reached();
                Err(Fault::Reply(said(&e)))
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    /// Runs `source` (whose SHA1 is `sha`) with EVALSHA, loading it when the
    /// server answers NOSCRIPT (after a restart, a failover, `SCRIPT FLUSH`).
    pub fn script(
        &self,
        sha: &str,
        source: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<Value, Fault> {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(sha).arg(keys.len());
        for k in keys {
            cmd.arg(*k);
        }
        for a in args {
            cmd.arg(*a);
        }
        match self.query(&cmd) {
            Err(Fault::Reply(text)) if text.contains("NOSCRIPT") => {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(source);
                if matches!(self.client, Clients::Cluster(_)) {
                    // A Redis Cluster routes SCRIPT LOAD to no slot: EVAL runs it
                    // (and loads it) on the node of the keys.
                    let mut eval = redis::cmd("EVAL");
                    eval.arg(source).arg(keys.len());
                    for k in keys {
                        eval.arg(*k);
                    }
                    for a in args {
                        eval.arg(*a);
                    }
                    return self.query(&eval);
                }
                self.query(&load)?;
                self.query(&cmd)
            }
            other => other,
        }
    }

    fn keep(&self, conn: Conn, pid: u32) {
        let link = Arc::downgrade(&self.token);
        let used = Instant::now();
        KEPT.with(|kept| {
            kept.borrow_mut().push(Kept {
                link,
                pid,
                conn,
                used,
            })
        });
    }

    /// Whether a connection left idle is still open: a server closes idle
    /// connections (its `timeout`) and a restarted one has closed them all.
    /// A PING tells (a command sent on a closed connection might have run
    /// or not, and must not be sent again); one that times out is the
    /// server's failure, not the connection's.
    fn sound(&self, conn: &mut Conn) -> Result<bool, Fault> {
        match conn.req(&redis::cmd("PING")) {
            Ok(Value::ServerError(_)) | Ok(_) => Ok(true),
            Err(e) if answered(&e) => Ok(true),
            Err(e) if e.is_timeout() => Err(self.fail(&e)),
            Err(_) => Ok(false),
        }
    }

    fn reached(&self) {
        if !self.up.load(Ordering::Relaxed) {
            self.up.store(true, Ordering::Relaxed);
        }
        if self.down_until.load(Ordering::Relaxed) != 0 {
            self.down_until.store(0, Ordering::Relaxed);
        }
    }

    fn connect(&self) -> Result<Conn, Fault> {
        let conn = match &self.client {
            Clients::Cluster(client) => client.get_connection().map(|c| Conn::Cluster(Box::new(c))),
            Clients::One(one) => one.get_connection_with_timeout(self.timeout).and_then(|c| {
                c.set_read_timeout(Some(self.timeout))?;
                c.set_write_timeout(Some(self.timeout))?;
                Ok(Conn::One(c))
            }),
        };
        conn.map_err(|e| self.fail(&e))
    }

    fn fail(&self, e: &RedisError) -> Fault {
        let timed_out = e.is_timeout();
        self.down(timed_out);
        let what = if timed_out {
            "timed out"
        } else {
            "unreachable"
        };
        Fault::Down {
            timed_out,
            why: format!("{what}: {e}"),
        }
    }

    fn down(&self, timed_out: bool) {
        self.up.store(false, Ordering::Relaxed);
        if timed_out {
            self.timeouts.fetch_add(1, Ordering::Relaxed);
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let until = clock() + self.retry_after.as_nanos() as u64;
        self.down_until.store(until.max(1), Ordering::Relaxed);
    }
}

/// An error the server answered as it said it: its code, then its text
/// (`NOSCRIPT No matching script...`, `ERR user_script:12: FENCED ...`).
fn said(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => e.to_string(),
    }
}

/// Whether `e` is an error the server answered (the connection is sound).
fn answered(e: &RedisError) -> bool {
    match e.kind() {
        ErrorKind::Server(k) => !matches!(
            k,
            redis::ServerErrorKind::ClusterDown
                | redis::ServerErrorKind::TryAgain
                | redis::ServerErrorKind::MasterDown
                | redis::ServerErrorKind::BusyLoading
        ),
        ErrorKind::Extension => true,
        _ => false,
    }
}

/// A connection of one thread's own (see [`Link::dedicated`]).
pub struct Dedicated<'a> {
    link: &'a Link,
    conn: Option<Conn>,
    pid: u32,
}

impl Dedicated<'_> {
    /// The server's reply to `cmd`. After a failure the connection is gone:
    /// every later call answers [`Fault::Down`]; make a new one.
    pub fn query(&mut self, cmd: &Cmd) -> Result<Value, Fault> {
        let gone = || Fault::Down {
            timed_out: false,
            why: "the connection failed before".into(),
        };
        if self.pid != ziggurat_core::current_pid() {
            std::mem::forget(self.conn.take());
            return Err(gone());
        }
        let conn = self.conn.as_mut().ok_or_else(gone)?;
        match conn.req(cmd) {
            Ok(Value::ServerError(e)) => Err(Fault::Reply(said(&RedisError::from(e)))),
            Ok(v) => {
                self.link.reached();
                Ok(v)
            }
            Err(e) if answered(&e) => Err(Fault::Reply(said(&e))),
            Err(e) => {
                self.conn = None;
                Err(self.link.fail(&e))
            }
        }
    }
}

impl Drop for Dedicated<'_> {
    fn drop(&mut self) {
        if self.pid != ziggurat_core::current_pid() {
            std::mem::forget(self.conn.take());
        }
    }
}

/// A link's client: of one server, or of a Redis Cluster's nodes.
enum Clients {
    One(Client),
    Cluster(ClusterClient),
}

/// The client of a Redis Cluster's nodes: no retries, each call bounded.
fn cluster_builder(
    infos: &[ConnectionInfo],
    certs: &Option<TlsCertificates>,
    connect: Duration,
    response: Duration,
) -> ClusterClientBuilder {
    let b = ClusterClientBuilder::new(infos.to_vec())
        .connection_timeout(connect)
        .response_timeout(response)
        .retries(0);
    match certs {
        Some(c) => b.certs(c.clone()),
        None => b,
    }
}
