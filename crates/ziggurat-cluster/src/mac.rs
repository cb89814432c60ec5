//! The MACs of what the tier puts in Redis: a value, a counter's mark and an
//! event each have a key of their own, derived per secret, so no MAC of one
//! kind checks as another. Redis is shared infrastructure: nothing read from it
//! is decoded before its MAC checks.
//!
//! A MAC is keyed BLAKE2b-128 (a MAC by construction, and cheaper than
//! HMAC-SHA256 on the small values a cache holds) over the cache's name, the
//! item (the key; empty for an event) and the bytes, each length first, so a
//! valid value cannot be moved to another key or another cache. The key is
//! BLAKE2b-256 of the secret, personalised `ziggurat-value`, `ziggurat-event`
//! or `ziggurat-counter`: any secret length fits BLAKE2b's 64-byte key limit.

use blake2::digest::consts::U16;
use blake2::digest::core_api::{Buffer, UpdateCore, VariableOutputCore};
use blake2::digest::Mac as _;
use blake2::{Blake2bMac, Blake2bVarCore};

/// Bytes of a MAC.
pub const MAC_LEN: usize = 16;

/// The fewest bytes a secret may have.
pub const MIN_SECRET: usize = 16;

type Keyed = Blake2bMac<U16>;

/// Why [`Signer::new`] refused its secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretProblem {
    /// No secret at all.
    None,
    /// A secret of fewer than [`MIN_SECRET`] bytes (its index).
    Short(usize),
}

/// Signs and checks the values, counters and events of one cache: the first
/// secret signs, every one verifies (rotation).
///
/// ```
/// use ziggurat_cluster::Signer;
/// let s = Signer::new(b"shop", &[b"new-secret-0123456789".to_vec(), b"old-secret-0123456789".to_vec()]).unwrap();
/// let mac = s.value_mac(b"user:1", b"payload");
/// assert!(s.value_ok(b"user:1", b"payload", &mac));
/// assert!(!s.value_ok(b"user:2", b"payload", &mac));
/// ```
#[derive(Clone)]
pub struct Signer {
    // Per secret, a MAC state that has taken its key and the cache's name: a MAC
    // clones it, cheaper than keying BLAKE2b again.
    values: Vec<Keyed>,
    counters: Vec<Keyed>,
    events: Vec<Keyed>,
}

impl Signer {
    /// The signer of the cache `name` (its segment's name) with `secrets`, the
    /// first of which signs.
    pub fn new(name: &[u8], secrets: &[Vec<u8>]) -> Result<Signer, SecretProblem> {
        if secrets.is_empty() {
            return Err(SecretProblem::None);
        }
        if let Some(i) = secrets.iter().position(|s| s.len() < MIN_SECRET) {
            return Err(SecretProblem::Short(i));
        }
        let states = |purpose: &[u8]| {
            secrets
                .iter()
                .map(|s| keyed(&derive(s, purpose), name))
                .collect()
        };
        Ok(Signer {
            values: states(b"value"),
            counters: states(b"counter"),
            events: states(b"event"),
        })
    }

    /// The MAC of a value's `body` stored under `key`.
    pub fn value_mac(&self, key: &[u8], body: &[u8]) -> [u8; MAC_LEN] {
        mac(&self.values[0], key, body)
    }

    /// Whether `mac` is the MAC of `body` under `key` for any secret (in
    /// constant time for each).
    pub fn value_ok(&self, key: &[u8], body: &[u8], mac: &[u8]) -> bool {
        self.values.iter().any(|k| ok(k, key, body, mac))
    }

    /// The mark that lets `key` hold a counter, signing it with `written` (the
    /// 8 bytes of its last `incr`'s write time): Redis adds to a counter, so its
    /// count cannot be signed, but only a key a host made a counter reads as
    /// one, and only with the write time the host gave it.
    ///
    /// ```
    /// use ziggurat_cluster::Signer;
    /// let s = Signer::new(b"c", &[b"0123456789abcdef".to_vec()]).unwrap();
    /// let mark = s.counter_mac(b"hits", &[0; 8]);
    /// assert!(s.counter_ok(b"hits", &[0; 8], &mark));
    /// assert!(!s.counter_ok(b"hits", &[0, 0, 0, 0, 0, 0, 0, 1], &mark));
    /// ```
    pub fn counter_mac(&self, key: &[u8], written: &[u8]) -> [u8; MAC_LEN] {
        mac(&self.counters[0], key, written)
    }

    /// Whether `mac` is the counter mark of `key` and `written` for any secret.
    pub fn counter_ok(&self, key: &[u8], written: &[u8], mac: &[u8]) -> bool {
        self.counters.iter().any(|k| ok(k, key, written, mac))
    }

    /// The MAC of an event's signed fields ([`signed_body`](crate::signed_body)).
    pub fn event_mac(&self, body: &[u8]) -> [u8; MAC_LEN] {
        mac(&self.events[0], b"", body)
    }

    /// Whether `mac` is the MAC of an event's signed fields for any secret.
    pub fn event_ok(&self, body: &[u8], mac: &[u8]) -> bool {
        self.events.iter().any(|k| ok(k, b"", body, mac))
    }
}

/// BLAKE2b-256 of `secret`, unkeyed, personalised `ziggurat-` + the first 7
/// bytes of `purpose`. Driven through the core: the MAC type would feed a
/// block of zeros for its empty key, which plain hashing does not.
fn derive(secret: &[u8], purpose: &[u8]) -> [u8; 32] {
    let mut person = b"ziggurat-".to_vec();
    person.extend_from_slice(&purpose[..purpose.len().min(7)]);
    let mut core = Blake2bVarCore::new_with_params(&[], &person, 0, 32);
    let mut buf = Buffer::<Blake2bVarCore>::default();
    buf.digest_blocks(secret, |blocks| core.update_blocks(blocks));
    let mut out = Default::default();
    core.finalize_variable_core(&mut buf, &mut out);
    let mut key = [0u8; 32];
    key.copy_from_slice(&out[..32]);
    key
}

fn keyed(key: &[u8; 32], name: &[u8]) -> Keyed {
    // A 32-byte key is within BLAKE2b's 64: this cannot fail.
    let mut k = Keyed::new_with_salt_and_personal(key, &[], &[])
        .unwrap_or_else(|_| unreachable!("a 32-byte key fits BLAKE2b's 64"));
    k.update(&(name.len() as u16).to_be_bytes());
    k.update(name);
    k
}

fn with_item(keyed: &Keyed, item: &[u8], body: &[u8]) -> Keyed {
    let mut h = keyed.clone();
    // Lengths first, so (name, item, body) splits one way only.
    h.update(&(item.len() as u32).to_be_bytes());
    h.update(item);
    h.update(body);
    h
}

fn mac(keyed: &Keyed, item: &[u8], body: &[u8]) -> [u8; MAC_LEN] {
    with_item(keyed, item, body).finalize().into_bytes().into()
}

fn ok(keyed: &Keyed, item: &[u8], body: &[u8], mac: &[u8]) -> bool {
    with_item(keyed, item, body).verify_slice(mac).is_ok()
}
