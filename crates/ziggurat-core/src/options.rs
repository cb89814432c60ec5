//! How to open a segment.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::geometry::check_avg_item;
use crate::huge::HugePages;
use crate::invalid::{Arg, Problem};

/// How to open a segment.
#[derive(Clone, Debug)]
pub struct Options {
    /// Byte budget of the whole file (used when creating it).
    pub size: u64,
    /// Directory of the file.
    pub directory: PathBuf,
    /// Replace a file that cannot be used instead of refusing it.
    pub recreate: bool,
    /// Expected bytes per entry (key + value + ~16), which sizes the index.
    pub avg_item_size: u64,
    /// Number of shards (power of two); `None` picks one from the size.
    pub shards: Option<u32>,
    /// How long a writer waits for a shard lock.
    pub lock_timeout: Duration,
    /// Share the file with the users of this group (a gid): a new file is
    /// created mode 660 with this group, and a file of another user is
    /// accepted when it has this group and mode exactly 660. `None`: the file
    /// is mode 600 and only its owner may use it.
    pub group: Option<u32>,
    /// Attach to an existing segment without ever writing to it (an operator's
    /// view): the file is mapped read-only, it is never created or repaired,
    /// reads do not raise entry frequencies nor count hits, and every
    /// operation that writes fails with [`Error::Invalid`]. The owner and mode
    /// rule of `group` holds as for a read-write open (whoever can write the
    /// file chooses what its readers decode), except that without `group` a
    /// file shared (mode 660) with any group of this process is accepted, and
    /// a file of this user only needs to be writable by no one it does not
    /// trust (mode 644 or 640 is fine, 666 is not).
    pub read_only: bool,
    /// Huge pages for the mapping: taken where the directory offers them
    /// (`Auto`), required (`Require`: the open fails without them) or refused
    /// (`Off`). See [`crate::huge`].
    pub huge_pages: HugePages,
}

impl Options {
    /// These options with the sizing and locking a caller asked for, each
    /// checked: `avg_item_size` 32 B to 16 MiB, `shards` 1 to 256 (None: from
    /// the size), `lock_timeout` finite seconds > 0 (at most an hour is used).
    ///
    /// ```
    /// use ziggurat_core::Options;
    /// assert!(Options::default().sized(128, Some(4), 0.5).is_ok());
    /// assert!(Options::default().sized(8, None, 0.5).is_err());
    /// ```
    pub fn sized(
        mut self,
        avg_item_size: i128,
        shards: Option<i128>,
        lock_timeout: f64,
    ) -> Result<Options> {
        check_avg_item(avg_item_size)?;
        self.avg_item_size = avg_item_size as u64;
        self.shards = match shards {
            None => None,
            Some(n) if (1..=256).contains(&n) => Some(n as u32),
            Some(n) => {
                return Err(Error::invalid(
                    Arg::Shards,
                    Problem::PowerOfTwo { max: 256, got: n },
                ))
            }
        };
        if !(lock_timeout.is_finite() && lock_timeout > 0.0) {
            return Err(Error::invalid(
                Arg::LockTimeout,
                Problem::Seconds {
                    got: lock_timeout,
                    zero: false,
                    never: false,
                },
            ));
        }
        self.lock_timeout = Duration::from_secs_f64(lock_timeout.min(3600.0));
        Ok(self)
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            size: 64 << 20,
            directory: PathBuf::from("/dev/shm"),
            recreate: false,
            avg_item_size: 128,
            shards: None,
            lock_timeout: Duration::from_millis(500),
            group: None,
            read_only: false,
            huge_pages: HugePages::Auto,
        }
    }
}
