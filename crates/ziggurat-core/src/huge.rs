//! Huge pages for a segment's mapping: whether the file system and the kernel
//! offer them for a directory, the advice a mapping needs to get them, and
//! whether they really back a mapping.
//!
//! A random read of a large segment misses the TLB on nearly every access
//! with 4 KiB pages; one 2 MiB entry covers 512 of them. Shared memory gets
//! huge pages only from a tmpfs whose `huge=` mount option allows them
//! (`always`, `within_size`, or `advise` for mappings that ask with
//! `madvise(MADV_HUGEPAGE)`), or everywhere when the kernel's shmem policy
//! (`/sys/kernel/mm/transparent_hugepage/shmem_enabled`) is `force`; `deny`
//! refuses them everywhere. `/dev/shm` is mounted without `huge=` on most
//! systems, so it has none.

#[cfg(target_os = "linux")]
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::invalid::{Arg, Problem};
use crate::shm::Shm;

/// The size of a PMD-mapped huge page on the machines the engine runs on.
pub const HUGE_PAGE: u64 = 2 << 20;

const SHMEM_POLICY: &str = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";

/// Whether a segment's mapping uses huge pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HugePages {
    /// Take them where the directory's file system offers them (the default).
    #[default]
    Auto,
    /// Fail the open (cause `no_huge_pages`) when they do not back the mapping.
    Require,
    /// Never: the mapping asks the kernel for small pages only.
    Off,
}

impl HugePages {
    /// Reads `"auto"`, `"require"` or `"off"`.
    ///
    /// ```
    /// use ziggurat_core::HugePages;
    /// assert_eq!(HugePages::parse("require").unwrap(), HugePages::Require);
    /// assert!(HugePages::parse("yes").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<HugePages> {
        match s {
            "auto" => Ok(HugePages::Auto),
            "require" => Ok(HugePages::Require),
            "off" => Ok(HugePages::Off),
            _ => Err(Error::invalid(
                Arg::HugePages,
                Problem::Choice {
                    allowed: &["auto", "require", "off"],
                    got: s.to_string(),
                },
            )),
        }
    }

    /// The name [`HugePages::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            HugePages::Auto => "auto",
            HugePages::Require => "require",
            HugePages::Off => "off",
        }
    }
}

/// What the system offers a file in one directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The file system type of the directory (`tmpfs`, `ext4`, ...; empty if unknown).
    pub fs_type: String,
    /// The tmpfs `huge=` mount option: `never` (also when absent), `always`,
    /// `within_size` or `advise`; empty for other file systems.
    pub mount: String,
    /// The kernel's shmem policy (`never`, `advise`, `always`, `within_size`,
    /// `deny`, `force`); empty when the kernel has no transparent huge pages.
    pub kernel: String,
}

impl Policy {
    /// The policy for files in `dir`.
    ///
    /// ```
    /// let p = ziggurat_core::huge::Policy::of(std::path::Path::new("/dev/shm"));
    /// assert!(!p.fs_type.is_empty());
    /// ```
    pub fn of(dir: &Path) -> Policy {
        let kernel = std::fs::read_to_string(SHMEM_POLICY)
            .ok()
            .and_then(|s| {
                s.split_whitespace()
                    .find(|w| w.starts_with('['))
                    .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
            })
            .unwrap_or_default();
        let (fs_type, options) = mount_of(dir).unwrap_or_default();
        let mount = if fs_type == "tmpfs" {
            options
                .split(',')
                .find_map(|o| o.strip_prefix("huge="))
                .unwrap_or("never")
                .to_string()
        } else {
            String::new()
        };
        Policy {
            fs_type,
            mount,
            kernel,
        }
    }

    /// Whether a mapping of a file here can get huge pages at all.
    pub fn offers(&self) -> bool {
        if self.kernel.is_empty() || self.kernel == "deny" || self.fs_type != "tmpfs" {
            return false;
        }
        self.kernel == "force" || matches!(self.mount.as_str(), "always" | "within_size" | "advise")
    }

    /// Whether a mapping gets them only when it asks (`madvise(MADV_HUGEPAGE)`),
    /// and a new file only if its pages are first touched through such a mapping.
    pub fn needs_advice(&self) -> bool {
        self.offers() && self.kernel != "force" && self.mount == "advise"
    }

    /// How to get huge pages here, for an operator; `None` when they are offered.
    pub fn remedy(&self, dir: &Path) -> Option<String> {
        if self.offers() {
            return None;
        }
        let d = dir.display();
        Some(if self.kernel.is_empty() {
            "this kernel has no transparent huge pages (CONFIG_TRANSPARENT_HUGEPAGE)".to_string()
        } else if self.kernel == "deny" {
            format!(
                "the kernel refuses huge pages to shared memory ({SHMEM_POLICY} is 'deny'): \
                 write 'never' or 'advise' there (root), then mount a tmpfs with \
                 huge=within_size for {d}"
            )
        } else if self.fs_type != "tmpfs" {
            format!(
                "{d} is on {}, not a tmpfs: put the segments on a tmpfs mounted with \
                 huge=within_size (mount -t tmpfs -o size=1G,huge=within_size tmpfs DIR)",
                if self.fs_type.is_empty() {
                    "an unknown file system"
                } else {
                    &self.fs_type
                }
            )
        } else {
            format!(
                "{d} is a tmpfs mounted without huge pages (huge={}): mount one with \
                 huge=within_size for the segments (mount -t tmpfs -o size=1G,huge=within_size \
                 tmpfs DIR, or remount: mount -o remount,huge=within_size {d})",
                self.mount
            )
        })
    }
}

/// The file system type and super-block options of the mount holding `dir`,
/// found in `/proc/self/mountinfo` by device number (the last mount of that
/// device wins: it is the one that covers the path).
#[cfg(target_os = "linux")]
fn mount_of(dir: &Path) -> Option<(String, String)> {
    let dev = std::fs::metadata(dir).ok()?.dev();
    let want = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines()
        .filter_map(|line| {
            // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
            let (left, right) = line.split_once(" - ")?;
            (left.split(' ').nth(2)? == want).then(|| {
                let mut r = right.split(' ');
                let fs = r.next().unwrap_or("").to_string();
                let _source = r.next();
                (fs, r.next().unwrap_or("").to_string())
            })
        })
        .next_back()
}

#[cfg(not(target_os = "linux"))]
fn mount_of(_dir: &Path) -> Option<(String, String)> {
    None
}

/// Whether huge pages back a segment's mapping in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HugeReport {
    /// The mode the segment was opened with.
    pub mode: HugePages,
    /// What the system offers the segment's directory.
    pub policy: Policy,
    /// Bytes of the file in whole 2 MiB pages: what huge pages could back at
    /// most (the same in every process).
    pub eligible_bytes: u64,
    /// Bytes of the mapping this process maps with huge pages, as the kernel
    /// counts them (`ShmemPmdMapped` + `FilePmdMapped` in `/proc/self/smaps`),
    /// after touching one word of every 2 MiB page.
    pub backed_bytes: u64,
}

impl HugeReport {
    /// Whether huge pages back the mapping (some of it at least).
    pub fn backed(&self) -> bool {
        self.backed_bytes > 0
    }
}

/// Bytes of the mapping starting at `start` that the kernel maps with huge
/// pages in this process, from `/proc/self/smaps`; 0 when it cannot tell.
pub(crate) fn pmd_mapped(start: usize) -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    let head = format!("{start:x}-");
    let mut inside = false;
    let mut kib = 0u64;
    for line in smaps.lines() {
        let header = line
            .split_once(' ')
            .is_some_and(|(range, _)| range.contains('-') && !range.ends_with(':'));
        if header {
            if inside {
                break;
            }
            inside = line.starts_with(&head);
            continue;
        }
        if inside {
            for field in ["ShmemPmdMapped:", "FilePmdMapped:"] {
                if let Some(v) = line.strip_prefix(field) {
                    kib += v
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .unwrap_or(0);
                }
            }
        }
    }
    kib * 1024
}

/// Gives a new mapping of a segment in `directory` the advice its mode
/// asks for: huge pages where the mount gives them only on request, small
/// pages where the mode refuses them. Advice that fails changes nothing the
/// segment relies on, so its error is dropped (the report tells the outcome).
pub(crate) fn advise(shm: &Shm, mode: HugePages, directory: &Path) {
    let policy = Policy::of(directory);
    match mode {
        HugePages::Auto | HugePages::Require if policy.needs_advice() => {
            let _ = shm.advise_huge(true);
        }
        // The mapping itself refuses them (see `Shm::map_small_pages`); the
        // advice keeps the kernel from allocating huge pages through it too.
        HugePages::Off if policy.offers() => {
            let _ = shm.advise_huge(false);
        }
        _ => {}
    }
}

/// The report of [`crate::Segment::huge_pages`] for a mapping `shm` of a
/// file in `directory`, opened in `mode`.
pub(crate) fn report(shm: &Shm, mode: HugePages, directory: &Path) -> HugeReport {
    let start = shm.start();
    let len = shm.len() as u64;
    let step = HUGE_PAGE as usize;
    let eligible_bytes = len / HUGE_PAGE * HUGE_PAGE;
    // A huge page maps a 2 MiB-aligned range of addresses to a 2 MiB-aligned
    // range of the file, so a mapping that starts off that alignment has none
    // (and nothing to touch).
    if start % step == 0 {
        let mut off = 0usize;
        while (off as u64) < eligible_bytes {
            let _ = shm.u64_at(off).load(Ordering::Relaxed);
            off += step;
        }
    }
    HugeReport {
        mode,
        policy: Policy::of(directory),
        eligible_bytes,
        backed_bytes: pmd_mapped(start).min(len),
    }
}
