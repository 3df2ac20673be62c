//! Pinning a workload's socket where no path names an inode held open (macOS has no
//! `/proc/self/fd`, and no `connectat`): the socket's inode is pinned by a hard link of the
//! dialler's own, made with `linkat` (which never follows a link) in a directory beside the run
//! directories that only the dialler's user can write ([`PINS`], mode 0700), checked to be the
//! very inode examined (device and inode numbers, a socket, its second name only), and dialled
//! there; the link is removed once dialled. What the workload does to its name meanwhile
//! changes nothing: the pinned name isn't its to touch. On a Mac the workload runs as the
//! dialler's own user, so that it can't write beside its run directory is its sandbox's rule
//! (the profile lets it write its own directories only). Used where Linux's way isn't there;
//! tested on Linux too.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat, fstat, linkat, mkdirat, openat};
use rustix::fs::{statat, unlinkat};
use rustix::io::Errno;

use super::{SocketRefused, split};

/// The directory of pins, in the run directories' root.
pub const PINS: &str = ".einsora-dial";

/// A socket's inode under a name only the dialler can change, removed when dropped.
pub(super) struct Pinned {
    pins: OwnedFd,
    name: String,
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
        let _ = unlinkat(&self.pins, self.name.as_str(), AtFlags::empty());
    }
}

pub(super) fn pin(path: &Path) -> Result<Pinned, SocketRefused> {
    let (root, run_dir, name) = split(path)?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root_fd = openat(CWD, root, flags, Mode::empty()).map_err(absent)?;
    let dir = openat(&root_fd, run_dir, flags, Mode::empty()).map_err(absent)?;
    let owner = fstat(&dir).map_err(absent)?.st_uid;
    let seen = statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(absent)?;
    check(&seen, owner, 1)?;
    let pins = pins(&root_fd)?;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let pinned_name = format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    linkat(&dir, name, &pins, pinned_name.as_str(), AtFlags::empty()).map_err(absent)?;
    let pinned = Pinned {
        path: root.join(PINS).join(&pinned_name),
        pins,
        name: pinned_name,
        owner,
    };
    let now = statat(
        &pinned.pins,
        pinned.name.as_str(),
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(absent)?;
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
        Err(e) => return Err(SocketRefused::Io(e.into())),
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let pins = openat(root, PINS, flags, Mode::empty()).map_err(|e| SocketRefused::Io(e.into()))?;
    let stat = fstat(&pins).map_err(|e| SocketRefused::Io(e.into()))?;
    let ours = stat.st_uid == rustix::process::geteuid().as_raw();
    if !ours || stat.st_mode & 0o077 != 0 {
        return Err(SocketRefused::Io(std::io::Error::other(format!(
            "{PINS}: not a directory of this user's own that only it can write"
        ))));
    }
    Ok(pins)
}

fn absent(e: Errno) -> SocketRefused {
    match e {
        Errno::NOENT => SocketRefused::Absent,
        // A symlink where a directory was asked for, or a loop.
        Errno::NOTDIR | Errno::LOOP => SocketRefused::NotASocket,
        e => SocketRefused::Io(e.into()),
    }
}
