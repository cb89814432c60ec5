//! Where everything lives in the segment file: the fixed sizes and limits,
//! the header fields, the shard header fields and counters. The sizes derived
//! from a byte budget are in `geometry`.
//!
//! The byte-level description is in docs/format.md; keep the two in step.

/// File magic: the first 8 bytes of every segment.
pub const MAGIC: [u8; 8] = *b"ZIGGURAT";
/// Layout version; part of the file name so incompatible builds never share a file.
pub const LAYOUT_VERSION: u32 = 2;
/// Bytes of the global header.
pub const HEADER_SIZE: usize = 4096;
/// Bytes of each shard header.
pub const SHARD_HDR: usize = 1024;
/// Cells per ghost bucket (u32 fingerprints, 32 bytes).
pub const GHOST_CELLS: usize = 8;
/// Longest key, in bytes.
pub const MAX_KEY: usize = 4096;
/// Most tags on one entry.
pub const MAX_TAGS: usize = 8;
/// Smallest segment accepted.
pub const MIN_SIZE: u64 = 1 << 20;
/// Largest segment accepted.
pub const MAX_SIZE: u64 = 128 << 30;

// Global header field offsets.
pub const H_MAGIC: usize = 0;
pub const H_VERSION: usize = 8;
pub const H_HEADER_SIZE: usize = 12;
pub const H_FILE_SIZE: usize = 16;
pub const H_NSHARDS: usize = 24;
pub const H_NPAIRS: usize = 28;
pub const H_NSTAMPS: usize = 32;
pub const H_NTAGS: usize = 36;
pub const H_SMALL_CAP: usize = 40;
pub const H_MAIN_CAP: usize = 48;
pub const H_GHOST_BUCKETS: usize = 56;
pub const H_MAX_KEY: usize = 60;
pub const H_MAX_VALUE: usize = 64;
pub const H_SEED: usize = 72;
pub const H_INSTANCE: usize = 80;
pub const H_STAMPS_OFF: usize = 88;
pub const H_TAGS_OFF: usize = 96;
pub const H_SHARDS_OFF: usize = 104;
pub const H_SHARD_STRIDE: usize = 112;
pub const H_INDEX_REL: usize = 120;
pub const H_GHOST_REL: usize = 128;
pub const H_SMALL_REL: usize = 136;
pub const H_MAIN_REL: usize = 144;
/// The checksum covers bytes `0..H_CHECKSUM`.
pub const H_CHECKSUM: usize = 248;
pub const H_STATE: usize = 256;
pub const H_EPOCH: usize = 264;
pub const H_TAG_INVALIDATIONS: usize = 320;
pub const H_CLEARS: usize = 328;
/// Words the layers above the engine keep in the segment (the cluster tier's
/// cursor and the election of its reader): `APP_WORDS` u64s, zero in a new
/// file, never read by the engine itself.
pub const H_APP: usize = 512;
/// How many such words there are.
pub const APP_WORDS: usize = 32;
/// Load-lease cells: `LEASE_CELLS` cells of 16 bytes filling the end of the
/// global header (see `lease`).
pub const H_LEASES: usize = 1024;
pub const LEASE_CELL: usize = 16;
pub const LEASE_CELLS: u32 = ((HEADER_SIZE - H_LEASES) / LEASE_CELL) as u32;

/// Which log ring of a shard a record lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RingId {
    /// S3-FIFO's small queue: new entries.
    Small = 0,
    /// S3-FIFO's main queue: entries seen again.
    Main = 1,
}

/// `state` values.
pub const STATE_READY: u32 = 0x5245_4459;
pub const STATE_RETIRED: u32 = 0x5245_5449;

// Shard header field offsets (relative to the shard's start).
pub const S_MUTEX: usize = 0;
pub const S_MUTEX_BYTES: usize = 64;
pub const S_INTENT_ACTIVE: usize = 64;
// Offset 68 (u32) is reserved: zero in every shard.
pub const S_INTENT_STAMP: usize = 72;
pub const S_SMALL_HEAD: usize = 128;
pub const S_SMALL_TAIL: usize = 136;
pub const S_MAIN_HEAD: usize = 192;
pub const S_MAIN_TAIL: usize = 200;
pub const S_GHOST_CURSOR: usize = 256;
pub const S_WAITERS: usize = 264;
pub const S_GHOST_EPOCH: usize = 272;
pub const S_GHOST_EPOCH_START: usize = 280;
/// The main ring's recent worth (an i64 in a u64 word, zero in a new file): up
/// by 4 per entry main keeps for a read, down by 3 per entry it drops unread,
/// within ±`evict::MAIN_SCORE_LIMIT` (see `Shard::main_takes_cold`).
pub const S_MAIN_SCORE: usize = 288;
pub const S_STATS: usize = 320;

/// Per-shard counters, each a u64 at `S_STATS + 8 * index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Stat {
    Hits = 0,
    Misses,
    Sets,
    Deletes,
    Evictions,
    Expirations,
    LockRepairs,
    LockTimeouts,
    ShardResets,
    Entries,
    Promotions,
    Reinsertions,
    GhostHits,
    IndexEvictions,
}

impl Stat {
    /// Every counter, in storage order.
    pub const ALL: [Stat; 14] = [
        Stat::Hits,
        Stat::Misses,
        Stat::Sets,
        Stat::Deletes,
        Stat::Evictions,
        Stat::Expirations,
        Stat::LockRepairs,
        Stat::LockTimeouts,
        Stat::ShardResets,
        Stat::Entries,
        Stat::Promotions,
        Stat::Reinsertions,
        Stat::GhostHits,
        Stat::IndexEvictions,
    ];

    /// Name used in `stats()`.
    pub fn name(self) -> &'static str {
        match self {
            Stat::Hits => "hits",
            Stat::Misses => "misses",
            Stat::Sets => "sets",
            Stat::Deletes => "deletes",
            Stat::Evictions => "evictions",
            Stat::Expirations => "expirations",
            Stat::LockRepairs => "lock_repairs",
            Stat::LockTimeouts => "lock_timeouts",
            Stat::ShardResets => "shard_resets",
            Stat::Entries => "entries",
            Stat::Promotions => "promotions",
            Stat::Reinsertions => "reinsertions",
            Stat::GhostHits => "ghost_hits",
            Stat::IndexEvictions => "index_evictions",
        }
    }

    /// Offset of the counter inside its shard header.
    #[inline]
    pub fn rel(self) -> usize {
        S_STATS + 8 * self as usize
    }
}
