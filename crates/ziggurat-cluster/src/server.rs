//! Where the tier's server is and how a host logs in to it: a Redis URL read
//! the way redis-py and node-redis read one, or the parts of an application's
//! own client (its host, port, database and credentials).
//!
//! - `redis://[user[:password]@]host[:port][/db]`, `rediss://` for TLS
//!   (`valkey://` and `valkeys://` are the same);
//! - `unix:///path/to/socket[?db=N]`;
//! - `?password=`, `?username=` and `?db=` in the query of any of them, and
//!   `?ssl_ca_certs=/path/ca.pem` (redis-py's name) in a `rediss://` URL: the
//!   certificates a server's is checked against instead of the system's.
//!
//! A password is never part of a message: a bad URL is named by its
//! [`redacted`](crate::redacted) form.

use std::path::PathBuf;

use percent_encoding::percent_decode_str;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::url::redacted;

/// How a host reaches one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// TCP, with TLS or without.
    Tcp {
        /// The host name or address.
        host: String,
        /// The port.
        port: u16,
        /// Whether the connection is TLS (`rediss://`).
        tls: bool,
    },
    /// A Unix socket.
    Unix(PathBuf),
}

/// One server and the login the host uses on it.
///
/// ```
/// use ziggurat_cluster::{Address, Endpoint};
/// let e = Endpoint::parse("redis://app:s%40cret@10.0.0.5:6380/2").unwrap();
/// assert_eq!(e.address, Address::Tcp { host: "10.0.0.5".into(), port: 6380, tls: false });
/// assert_eq!((e.db, e.username.as_deref(), e.password.as_deref()), (2, Some("app"), Some("s@cret")));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Where the server is.
    pub address: Address,
    /// The database number (`SELECT`), 0 by default.
    pub db: i64,
    /// The ACL user, if any.
    pub username: Option<String>,
    /// The password, if any.
    pub password: Option<String>,
    /// The PEM file of the certificates a TLS server's certificate is checked
    /// against (none: the system's roots and the public ones).
    pub ca: Option<PathBuf>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("address", &self.address)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("ca", &self.ca)
            .finish()
    }
}

fn unquote(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

impl Endpoint {
    /// The server a URL names. The error says what is wrong, with the URL's
    /// passwords hidden.
    ///
    /// ```
    /// use ziggurat_cluster::Endpoint;
    /// let e = Endpoint::parse("unix:///run/redis.sock?db=3&password=pw").unwrap();
    /// assert_eq!((e.db, e.password.as_deref()), (3, Some("pw")));
    /// let bad = Endpoint::parse("redis://u:hunter2@host:99999/0").unwrap_err();
    /// assert!(bad.contains("port") && !bad.contains("hunter2"), "{bad}");
    /// let tls = Endpoint::parse("rediss://h:6380/0?ssl_ca_certs=/etc/ssl/ca.pem").unwrap();
    /// assert_eq!(tls.ca.as_deref(), Some(std::path::Path::new("/etc/ssl/ca.pem")));
    /// assert!(Endpoint::parse("redis://h/0?ssl_ca_certs=/ca.pem").unwrap_err().contains("rediss://"));
    /// ```
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let shown = redacted(url);
        let bad = |why: &str| format!("redis URL {shown:?} is not valid: {why}");
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("it has no scheme (redis://, rediss:// or unix://)"))?;
        let scheme = scheme.to_ascii_lowercase();
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, q.split_once('#').map_or(q, |(q, _)| q)),
            None => (rest.split_once('#').map_or(rest, |(r, _)| r), ""),
        };
        let mut db: Option<i64> = None;
        let mut username = None;
        let mut password = None;
        let mut ca = None;
        let number = |s: &str, what: &str| {
            s.parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| bad(&format!("{what} must be a number >= 0")))
        };
        let address = match scheme.as_str() {
            "unix" => {
                let path = unquote(rest);
                if !path.starts_with('/') {
                    return Err(bad("a unix:// URL needs an absolute socket path"));
                }
                Address::Unix(PathBuf::from(path))
            }
            "redis" | "rediss" | "valkey" | "valkeys" => {
                let tls = matches!(scheme.as_str(), "rediss" | "valkeys");
                let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
                let hostport = match authority.rsplit_once('@') {
                    Some((userinfo, hostport)) => {
                        let (u, p) = match userinfo.split_once(':') {
                            Some((u, p)) => (u, Some(p)),
                            None => (userinfo, None),
                        };
                        if !u.is_empty() {
                            username = Some(unquote(u));
                        }
                        password = p.map(unquote);
                        hostport
                    }
                    None => authority,
                };
                let (host, port) = split_host_port(hostport)
                    .ok_or_else(|| bad("its port must be a number from 1 to 65535"))?;
                if host.is_empty() {
                    return Err(bad("it names no host"));
                }
                let path = path.trim_matches('/');
                if !path.is_empty() {
                    db = Some(number(path, "the database in its path")?);
                }
                Address::Tcp { host, port, tls }
            }
            _ => return Err(bad("the scheme must be redis://, rediss:// or unix://")),
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = unquote(&value.replace('+', " "));
            match unquote(name).to_ascii_lowercase().as_str() {
                "db" => db = Some(number(&value, "db")?),
                "password" => password = Some(value),
                "username" => username = Some(value),
                "ssl_ca_certs" => ca = Some(PathBuf::from(value)),
                // redis-py's timings: checked as it checks them, then left to the
                // cache's own timeout (every call is bounded by it).
                t @ ("socket_timeout" | "socket_connect_timeout" | "health_check_interval") => {
                    if !value.parse::<f64>().is_ok_and(|v| v >= 0.0) {
                        return Err(bad(&format!("{t} must be a number of seconds")));
                    }
                }
                other => {
                    return Err(bad(&format!(
                        "the cache does not read the parameter {other:?} (it reads db, \
                         username, password and ssl_ca_certs; its timeout is its own)"
                    )))
                }
            }
        }
        if ca.is_some() && !matches!(address, Address::Tcp { tls: true, .. }) {
            return Err(bad("ssl_ca_certs needs a rediss:// URL (TLS)"));
        }
        Ok(Endpoint {
            address,
            db: db.unwrap_or(0),
            username,
            password: password.filter(|p| !p.is_empty()),
            ca,
        })
    }

    /// What the Redis client connects with.
    pub(crate) fn connection_info(&self) -> Result<ConnectionInfo, String> {
        let addr = match &self.address {
            Address::Tcp {
                host,
                port,
                tls: false,
            } => ConnectionAddr::Tcp(host.clone(), *port),
            Address::Tcp {
                host,
                port,
                tls: true,
            } => ConnectionAddr::TcpTls {
                host: host.clone(),
                port: *port,
                insecure: false,
                tls_params: None,
            },
            Address::Unix(path) => ConnectionAddr::Unix(path.clone()),
        };
        let mut redis = RedisConnectionInfo::default()
            .set_db(self.db)
            .set_skip_set_lib_name();
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        let info = addr.into_connection_info().map_err(|e| e.to_string())?;
        Ok(info.set_redis_settings(redis))
    }
}

/// `(host, port)` of `host[:port]` or `[v6]:port` (6379 by default).
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let port_of = |p: &str| p.parse::<u16>().ok().filter(|p| *p > 0);
    if let Some(v6) = s.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => port_of(p)?,
            None if after.is_empty() => 6379,
            None => return None,
        };
        return Some((host.to_owned(), port));
    }
    match s.rsplit_once(':') {
        Some((host, p)) => Some((unquote(host), port_of(p)?)),
        None => Some((unquote(s), 6379)),
    }
}

/// The server a cache's tier uses: one server, or the nodes of a Redis
/// Cluster (every key of a cache shares one hash tag, so each script runs on
/// one node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Server {
    /// One server (a primary, or a proxy in front of several).
    One(Endpoint),
    /// The seed nodes of a Redis Cluster, with one login.
    Cluster(Vec<Endpoint>),
}

impl Server {
    /// The server of `urls`: one, or (`cluster`) the seed nodes of a Redis
    /// Cluster; Err says what is wrong, naming a URL with its passwords
    /// hidden.
    ///
    /// ```
    /// use ziggurat_cluster::Server;
    /// assert!(matches!(Server::of(&["redis://h:6379/0"], false), Ok(Server::One(_))));
    /// assert_eq!(Server::of(&["redis://a", "redis://b"], false).unwrap_err(), "one server expected, got 2");
    /// ```
    pub fn of<S: AsRef<str>>(urls: &[S], cluster: bool) -> Result<Server, String> {
        let mut nodes = urls
            .iter()
            .map(|u| Endpoint::parse(u.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        match (cluster, nodes.len()) {
            (true, _) => Ok(Server::Cluster(nodes)),
            (false, 1) => Ok(Server::One(nodes.remove(0))),
            (false, n) => Err(format!("one server expected, got {n}")),
        }
    }

    /// How the server is named in messages: its address, never its login.
    ///
    /// ```
    /// use ziggurat_cluster::{Endpoint, Server};
    /// let s = Server::One(Endpoint::parse("redis://:pw@127.0.0.1:6380/0").unwrap());
    /// assert_eq!(s.shown(), "127.0.0.1:6380");
    /// ```
    pub fn shown(&self) -> String {
        let one = |e: &Endpoint| match &e.address {
            Address::Tcp { host, port, .. } if host.contains(':') => format!("[{host}]:{port}"),
            Address::Tcp { host, port, .. } => format!("{host}:{port}"),
            Address::Unix(p) => p.display().to_string(),
        };
        match self {
            Server::One(e) => one(e),
            Server::Cluster(nodes) => nodes.iter().map(one).collect::<Vec<_>>().join(","),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_read_as_redis_py_reads_them() {
        let e = Endpoint::parse("rediss://[::1]:6390").unwrap();
        assert_eq!(
            e.address,
            Address::Tcp {
                host: "::1".into(),
                port: 6390,
                tls: true
            }
        );
        let e = Endpoint::parse("redis://localhost?password=p%20w&db=4").unwrap();
        assert_eq!((e.db, e.password.as_deref()), (4, Some("p w")));
        assert_eq!(
            Endpoint::parse("redis://h").unwrap().address,
            Address::Tcp {
                host: "h".into(),
                port: 6379,
                tls: false
            }
        );
        let e = Endpoint::parse("redis://user@h:1/").unwrap();
        assert_eq!((e.username.as_deref(), e.password), (Some("user"), None));
        for bad in [
            "h:1",
            "http://h",
            "redis://:pw@/0",
            "redis://h:x/0",
            "redis://h/x",
            "unix://rel.sock",
        ] {
            let e = Endpoint::parse(bad).unwrap_err();
            assert!(
                e.contains("is not valid") && !e.contains("pw@"),
                "{bad}: {e}"
            );
        }
        assert!(
            !format!("{:?}", Endpoint::parse("redis://:hunter2@h").unwrap()).contains("hunter2")
        );
    }
}
