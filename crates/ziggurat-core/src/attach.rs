//! Attaching to an existing segment file: mapping it, then checking its
//! header (magic, layout version, checksum, state, geometry) before any
//! offset read from it is used.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::error::{Error, OpenCause, Result};
use crate::geometry::Geometry;
use crate::hash::checksum;
use crate::huge::{HugePages, Policy};
use crate::layout::*;
use crate::options::Options;
use crate::segment::Segment;
use crate::shm::Shm;

/// Whether the mapping must refuse huge pages (`huge_pages` off) where the
/// directory offers them.
pub(crate) fn small_pages(opts: &Options) -> bool {
    opts.huge_pages == HugePages::Off && Policy::of(&opts.directory).offers()
}

impl Segment {
    /// Maps the file of `file_len` bytes at `path` (read-only, or with small
    /// pages, as asked) and checks its header; returns the mapping, the
    /// geometry the header describes and the hash seed.
    pub(crate) fn attach(
        file: &File,
        path: &Path,
        file_len: u64,
        read_only: bool,
        small: bool,
    ) -> Result<(Shm, Geometry, u64)> {
        if file_len < HEADER_SIZE as u64 || file_len % 8 != 0 {
            return Err(Error::open(
                OpenCause::Damaged,
                format!("it is an incomplete file of {file_len} bytes"),
            ));
        }
        let map = |file: &File, len: usize| {
            if small {
                Shm::map_small_pages(file, len, read_only)
            } else if read_only {
                Shm::map_read_only(file, len)
            } else {
                Shm::map(file, len)
            }
        };
        let shm = map(file, file_len as usize)
            .map_err(|e| Error::Io(format!("cannot map {}", path.display()), e))?;
        let mut magic = [0u8; 8];
        shm.read_racy(H_MAGIC, &mut magic);
        let get64 = |off: usize| shm.u64_at(off).load(Ordering::Acquire);
        let get32 = |off: usize| shm.u32_at(off).load(Ordering::Acquire);
        if magic == [0u8; 8] && get32(H_STATE) == 0 {
            return Err(Error::open(
                OpenCause::Damaged,
                "it is empty: it was never initialised",
            ));
        }
        if magic != MAGIC {
            return Err(Error::open(
                OpenCause::Incompatible,
                "it is not a ziggurat segment (foreign magic)",
            ));
        }
        let v = get32(H_VERSION);
        if v != LAYOUT_VERSION {
            return Err(Error::open(
                OpenCause::Incompatible,
                format!("its layout version is {v}, this build reads version {LAYOUT_VERSION}"),
            ));
        }
        let mut hdr = vec![0u8; H_CHECKSUM];
        shm.read_racy(0, &mut hdr);
        if checksum(&hdr) != get64(H_CHECKSUM) {
            return Err(Error::open(
                OpenCause::Damaged,
                "its header checksum does not match (the header is damaged)",
            ));
        }
        match get32(H_STATE) {
            STATE_READY => {}
            STATE_RETIRED => return Err(Error::open(OpenCause::Damaged, "it was retired")),
            _ => return Err(Error::open(OpenCause::Damaged, "its state word is damaged")),
        }
        let g = Geometry {
            file_size: get64(H_FILE_SIZE),
            nshards: get32(H_NSHARDS),
            npairs: get32(H_NPAIRS),
            nstamps: get32(H_NSTAMPS),
            ntags: get32(H_NTAGS),
            small_cap: get64(H_SMALL_CAP),
            main_cap: get64(H_MAIN_CAP),
            ghost_buckets: get32(H_GHOST_BUCKETS),
            max_key: get32(H_MAX_KEY),
            max_value: get32(H_MAX_VALUE),
            stamps_off: get64(H_STAMPS_OFF),
            tags_off: get64(H_TAGS_OFF),
            shards_off: get64(H_SHARDS_OFF),
            shard_stride: get64(H_SHARD_STRIDE),
            index_rel: get64(H_INDEX_REL),
            ghost_rel: get64(H_GHOST_REL),
            small_rel: get64(H_SMALL_REL),
            main_rel: get64(H_MAIN_REL),
        };
        g.check(file_len)?;
        let seed = get64(H_SEED);
        Ok((shm, g, seed))
    }
}
