//! Pinning a workload's socket where no path names an inode held open (macOS has no
//! `/proc/self/fd`): the socket's inode is pinned by a hard link of the dialler's own, made with
//! `linkat` (which never follows a link) in a directory beside the run directories that only the
//! dialler's user can write ([`PINS`], mode 0700, in a root only it can write either), checked
//! to be the very inode examined (device and inode numbers, a socket, its second name only), and
//! dialled there; the link is removed once dialled. What the workload does to its name
//! meanwhile changes nothing: the pinned name isn't its to touch. Dials take turns (an exclusive
//! lock on the pins' directory, held from the first look until the link is gone: the agent's
//! probe and the access proxy dial the same sockets), so a socket never has more than one pin,
//! and what a dialler killed midway left behind is removed by the next. On a Mac the workload
//! runs as the dialler's own user, so that it can't write beside its run directory is its
//! sandbox's rule (the profile lets it write its own directories only). Used where Linux's way
//! isn't there; tested on Linux too.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Dir, FileType, FlockOperation, Mode, OFlags, Stat, flock};
use rustix::fs::{fstat, linkat, mkdirat, openat, statat, unlinkat};
use rustix::io::Errno;

use super::{SocketRefused, split};

/// The directory of pins, in the run directories' root.
pub const PINS: &str = ".einsora-dial";
/// The one pin's name: dials take turns.
const PIN: &str = "pin";

/// A socket's inode under a name only the dialler can change, removed when dropped (and the
/// pins' directory unlocked, with its descriptor).
pub(super) struct Pinned {
    pins: OwnedFd,
    path: PathBuf,
    pub(super) owner: u32,
}

impl Pinned {
    pub(super) fn proc_path(&self) -> PathBuf {
        self.path.clone()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = unlinkat(&self.pins, PIN, AtFlags::empty());
    }
}

/// Blocks while another dial of the same root holds the pins' directory: call it off async
/// threads.
pub(super) fn pin(path: &Path) -> Result<Pinned, SocketRefused> {
    let (root, run_dir, name) = split(path)?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root_fd = openat(CWD, root, flags, Mode::empty()).map_err(absent)?;
    // The pin is dialled by its path through `root`: only the dialler may change `root`.
    closed(&root_fd, "the run directories' root")?;
    let pins = pins(&root_fd)?;
    flock(&pins, FlockOperation::LockExclusive).map_err(io)?;
    clear(&pins)?;
    let dir = openat(&root_fd, run_dir, flags, Mode::empty()).map_err(absent)?;
    let owner = fstat(&dir).map_err(absent)?.st_uid;
    let seen = statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(absent)?;
    check(&seen, owner, 1)?;
    linkat(&dir, name, &pins, PIN, AtFlags::empty()).map_err(absent)?;
    let pinned = Pinned {
        path: root.join(PINS).join(PIN),
        pins,
        owner,
    };
    let now = statat(&pinned.pins, PIN, AtFlags::SYMLINK_NOFOLLOW).map_err(absent)?;
    // Another file than the one examined: its name was replaced in between.
    if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino) {
        return Err(SocketRefused::NotASocket);
    }
    check(&now, owner, 2)?;
    Ok(pinned)
}

/// A socket of the run directory's owner, with `names` names.
fn check(stat: &Stat, owner: u32, names: u64) -> Result<(), SocketRefused> {
    if FileType::from_raw_mode(stat.st_mode) != FileType::Socket {
        return Err(SocketRefused::NotASocket);
    }
    // `st_nlink` is a u64 on Linux and a u16 on macOS.
    #[allow(clippy::useless_conversion)]
    let links = u64::from(stat.st_nlink);
    if links != names {
        return Err(SocketRefused::HardLinked);
    }
    if stat.st_uid != owner {
        return Err(SocketRefused::WrongOwner {
            expected: owner,
            found: stat.st_uid,
        });
    }
    Ok(())
}

/// The pins' directory in `root`, made if missing: the dialler's own, that no one else can
/// write (or it is refused).
fn pins(root: &OwnedFd) -> Result<OwnedFd, SocketRefused> {
    match mkdirat(root, PINS, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(io(e)),
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let pins = openat(root, PINS, flags, Mode::empty()).map_err(io)?;
    closed(&pins, PINS)?;
    Ok(pins)
}

/// Whether `dir` is the dialler's user's own, and no one else can write it.
fn closed(dir: &OwnedFd, what: &str) -> Result<(), SocketRefused> {
    let stat = fstat(dir).map_err(io)?;
    let ours = stat.st_uid == rustix::process::geteuid().as_raw();
    if !ours || stat.st_mode & 0o022 != 0 {
        return Err(SocketRefused::Io(std::io::Error::other(format!(
            "{what}: not a directory of this user's own that only it can write"
        ))));
    }
    Ok(())
}

/// Removes what a dialler killed midway left in the pins' directory (held locked: nothing in it
/// is in use).
fn clear(pins: &OwnedFd) -> Result<(), SocketRefused> {
    let mut left = Vec::new();
    for entry in Dir::read_from(pins).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            left.push(name.to_owned());
        }
    }
    for name in left {
        unlinkat(pins, name.as_c_str(), AtFlags::empty()).map_err(io)?;
    }
    Ok(())
}

fn io(e: Errno) -> SocketRefused {
    SocketRefused::Io(e.into())
}

fn absent(e: Errno) -> SocketRefused {
    match e {
        Errno::NOENT => SocketRefused::Absent,
        // A symlink where a directory was asked for, or a loop.
        Errno::NOTDIR | Errno::LOOP => SocketRefused::NotASocket,
        e => SocketRefused::Io(e.into()),
    }
}
