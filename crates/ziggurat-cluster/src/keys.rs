//! The names of a cache's keys in Redis, and of the notes a host keeps in its
//! segment about the writes it knows of.
//!
//! Every Redis key of a cache shares one hash tag, `{zg2:<segment name>}`, so
//! the scripts that touch several of them run on Redis Cluster too. `zg2` names
//! the format of the values and events: a host of an older format uses other
//! keys, so neither reads what the other wrote.

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

/// The Redis keys of one cache.
///
/// ```
/// use ziggurat_cluster::Keys;
/// let k = Keys::new("shop");
/// assert_eq!(k.value(b"user:1"), b"{zg2:shop}:v:user:1");
/// assert_eq!(k.write(b"user:1")[3], b"{zg2:shop}:ev");
/// ```
#[derive(Clone, Debug)]
pub struct Keys {
    prefix: Vec<u8>,
    /// The hash of every tag's version.
    pub tags: Vec<u8>,
    /// The counter that numbers the events.
    pub seq: Vec<u8>,
    /// The stream of events.
    pub stream: Vec<u8>,
    /// The stream's generation (set at its first write).
    pub gen: Vec<u8>,
    /// The hash of every host's fence.
    pub hosts: Vec<u8>,
}

impl Keys {
    /// The keys of the cache whose segment is named `segment_name`.
    pub fn new(segment_name: &str) -> Keys {
        let mut prefix = b"{zg2:".to_vec();
        prefix.extend_from_slice(segment_name.as_bytes());
        prefix.extend_from_slice(b"}:");
        let named = |s: &[u8]| [prefix.as_slice(), s].concat();
        Keys {
            tags: named(b"tags"),
            seq: named(b"seq"),
            stream: named(b"ev"),
            gen: named(b"gen"),
            hosts: named(b"hosts"),
            prefix,
        }
    }

    /// What every key of the cache starts with.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The key that holds `key`'s value.
    pub fn value(&self, key: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), b"v:", key].concat()
    }

    /// The key of `key`'s cluster-wide load lease.
    pub fn lease(&self, key: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), b"lease:", key].concat()
    }

    /// The read script's KEYS for `key`: its value, the tag versions.
    pub fn read(&self, key: &[u8]) -> [Vec<u8>; 2] {
        [self.value(key), self.tags.clone()]
    }

    /// The write script's KEYS for `key`: its value, the tag versions, the
    /// sequence, the stream, the generation and the fences. The writes that
    /// name no key (tags, clear, recover) pass the tags key as `key`: the
    /// script never reads that slot, but it holds the cache's hash tag.
    pub fn write(&self, key: &[u8]) -> [Vec<u8>; 6] {
        [
            self.value(key),
            self.tags.clone(),
            self.seq.clone(),
            self.stream.clone(),
            self.gen.clone(),
            self.hosts.clone(),
        ]
    }
}

/// The segment key of a host's note about a key (`b"k" + key`) or a tag
/// (`b"t" + tag`): the latest write time it knows of, which refuses older
/// bodies. Fixed size whatever the key's, in a space of keys an application
/// is unlikely to use.
///
/// ```
/// use ziggurat_cluster::note_key;
/// assert_eq!(note_key(b"kuser:1").len(), 9 + 16);
/// assert!(note_key(b"kuser:1").starts_with(b"\x00zg-note:"));
/// ```
pub fn note_key(what: &[u8]) -> Vec<u8> {
    let digest = Blake2b::<U16>::digest(what);
    [b"\x00zg-note:".as_slice(), digest.as_slice()].concat()
}
