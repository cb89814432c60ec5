//! Who may use a segment file: the owner, group and mode rule every open
//! applies to the file it opened, with the message that explains a refusal.

use std::path::Path;

use crate::invalid::{setting_mark, Arg};
use crate::options::Options;
use crate::sys;

/// The owner, group and mode rule for sharing a segment file: whether this
/// process may use a file with `uid`, `gid` and `mode`.
pub(crate) enum Access {
    /// Usable.
    Ok,
    /// Owned by this user but with permissions it would not have created
    /// (replaceable with `recreate`).
    Loose(String),
    /// Owned by another user, and not shared through the configured group.
    Refused(String),
}

/// The rule is the same for read-only and read-write opens, because whoever
/// can write a file chooses the bytes every reader decodes (pickled values run
/// code): only this user's files, and files shared (mode 660) with a group this
/// process trusts, are used. A read-write open trusts the configured `group`
/// alone; a read-only view without `group` trusts a file shared with any group
/// this process is a member of (its membership is the administrator's choice),
/// and takes a file of this user that no untrusted user can write, whatever
/// else its mode allows (a view never widens who can write it).
pub(crate) fn judge_access(path: &Path, uid: u32, gid: u32, mode: u32, opts: &Options) -> Access {
    let group = opts.group;
    let mode = mode & 0o7777;
    let me = sys::euid();
    let trusted_group = match group {
        Some(g) => g == gid,
        None => opts.read_only && sys::in_group(gid),
    };
    let group_ok = mode == 0o660 && trusted_group;
    if uid == me {
        if group_ok {
            return Access::Ok;
        }
        // A view makes the file no more writable than it is: it needs only that
        // no untrusted user can write it (a copy made 644 for inspection is fine).
        if opts.read_only && mode & 0o002 == 0 && (mode & 0o020 == 0 || trusted_group) {
            return Access::Ok;
        }
        if mode & 0o077 == 0 {
            // A private file is fine, unless its owner asks to rebuild it
            // shared with a group (the remedy other users are told about).
            return match group {
                Some(g) if opts.recreate => Access::Loose(format!(
                    "it is private to its owner (mode {mode:o}), not shared with {}",
                    sys::describe_group(g)
                )),
                _ => Access::Ok,
            };
        }
        return Access::Loose(match group {
            Some(g) if g == gid => format!(
                "its mode is {mode:o}; a segment shared with {} must be exactly 660",
                sys::describe_group(g)
            ),
            Some(g) => format!(
                "its mode is {mode:o} and its group is {}, not the configured {}",
                sys::describe_group(gid),
                sys::describe_group(g)
            ),
            None => format!(
                "it is readable or writable by other users (mode {mode:o}; without {} \
                 a segment must be 600)",
                setting_mark(Arg::Group, "<gid>")
            ),
        });
    }
    // Another user's file counts as shared only if its owner is a member of the
    // group too: in a setgid directory any user's new file takes the directory's
    // group, member or not.
    if group_ok && sys::user_in_group(uid, gid) {
        return Access::Ok;
    }
    let mut why = format!(
        "segment file {} is owned by {}, this process runs as {}",
        path.display(),
        sys::describe_user(uid),
        sys::describe_user(me)
    );
    match group {
        _ if group_ok => why += &format!(
            "; it is shared (mode 660) with {}, but its owner is not a member of that group \
             (in a directory with the setgid bit, anyone's new file takes the directory's group)",
            sys::describe_group(gid)
        ),
        Some(g) if g == gid => why += &format!(
            "; it has the configured {} but mode {mode:o}, and a shared segment must be exactly 660",
            sys::describe_group(g)
        ),
        Some(g) => why += &format!(
            "; its group is {}, not the configured {}",
            sys::describe_group(gid),
            sys::describe_group(g)
        ),
        None => {}
    }
    if opts.read_only {
        why += ". Refusing to read memory another user can write (its contents could run code \
                in this process when decoded): run this process as that user, or as a member \
                of the file's group once its owner shares it (mode 660)";
    } else {
        let group = setting_mark(Arg::Group, "<gid>");
        why += &format!(
            ". Refusing to share memory with another user: run every process as the same \
             user, or share a group ({group}, which creates the file mode 660 for that \
             group; its owner rebuilds an existing file that way by opening it with \
             {group} and {}), or choose another directory",
            setting_mark(Arg::Recreate, "true")
        );
    }
    why += ". If no process of this service made that file, another user may have taken the \
            name first in a directory every user can write: give the service a directory \
            only it can write (systemd RuntimeDirectory=, $XDG_RUNTIME_DIR, a container's own \
            /dev/shm)";
    Access::Refused(why)
}

/// The process's user, for messages.
pub(crate) fn me() -> String {
    sys::describe_user(sys::euid())
}
