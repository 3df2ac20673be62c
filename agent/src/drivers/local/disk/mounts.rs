//! Mount points the agent owns, under its state directory (which only the agent can write):
//! checked before anything is mounted on them (the agent's own directory, not a link, empty),
//! a small tmpfs for a run directory, and unmounting. A path is never followed into anything
//! a workload made: the checks read the entry itself, and unmounting never follows a link.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `statfs`'s `f_type` of a tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Whether a filesystem is mounted on `dir` (its device isn't its parent's). A link is never
/// a mount point here: it isn't followed.
pub fn is_mount_point(dir: &Path) -> io::Result<bool> {
    let meta = std::fs::symlink_metadata(dir)?;
    let parent = dir
        .parent()
        .ok_or_else(|| io::Error::other("a mount point has a parent directory"))?;
    let up = std::fs::symlink_metadata(parent)?;
    Ok(meta.file_type().is_dir() && meta.dev() != up.dev())
}

/// Whether `dir` is a mount point with a tmpfs on it.
pub fn is_tmpfs_mount(dir: &Path) -> io::Result<bool> {
    if !is_mount_point(dir)? {
        return Ok(false);
    }
    let fs = rustix::fs::statfs(dir)?;
    // Its width differs between platforms.
    #[allow(clippy::unnecessary_cast)]
    let kind = fs.f_type as i64;
    Ok(kind == TMPFS_MAGIC)
}

/// Checks that `dir` is what the agent mounts on: a directory (not a link to one) of its own,
/// with nothing in it.
pub fn check_bare(dir: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    let refused = |why: &str| Err(io::Error::other(format!("{}: {why}", dir.display())));
    if !meta.file_type().is_dir() {
        return refused("not a directory (a link, or a file)");
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return refused("not a directory of the agent's own");
    }
    if std::fs::read_dir(dir)?.next().is_some() {
        return refused("not empty: nothing is mounted over files");
    }
    Ok(())
}

/// Mounts a tmpfs of at most `bytes` and `inodes` on `dir`, owner-only, `user`'s; nothing on
/// it can be run or be a device. Its pages count against the memory of whoever writes them.
#[cfg(target_os = "linux")]
pub fn mount_tmpfs(dir: &Path, bytes: u64, inodes: u32, (uid, gid): (u32, u32)) -> io::Result<()> {
    use rustix::mount::{MountFlags, mount};
    let options = format!("size={bytes},nr_inodes={inodes},mode=0700,uid={uid},gid={gid}");
    let options = std::ffi::CString::new(options).map_err(io::Error::other)?;
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    mount("tmpfs", dir, "tmpfs", flags, options.as_c_str())?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn mount_tmpfs(_: &Path, _: u64, _: u32, _: (u32, u32)) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "mounting a tmpfs for a workload is Linux-only",
    ))
}

/// Unmounts everything mounted on `dir` (a busy filesystem is detached, and goes once its
/// last user lets go); nothing mounted, or no `dir`: nothing to do.
#[cfg(target_os = "linux")]
pub fn unmount_all(dir: &Path) -> io::Result<()> {
    use rustix::io::Errno;
    use rustix::mount::{UnmountFlags, unmount};
    // Mounts stacked on one another: a few at most, each a separate unmount.
    for _ in 0..8 {
        match is_mount_point(dir) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        match unmount(dir, UnmountFlags::NOFOLLOW) {
            Ok(()) => {}
            Err(Errno::BUSY) => unmount(dir, UnmountFlags::NOFOLLOW | UnmountFlags::DETACH)?,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other(format!(
        "{}: still a mount point after unmounting it 8 times",
        dir.display()
    )))
}

#[cfg(not(target_os = "linux"))]
pub fn unmount_all(dir: &Path) -> io::Result<()> {
    match is_mount_point(dir) {
        Ok(false) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Ok(true) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: unmounting a workload's filesystems is Linux-only",
                dir.display()
            ),
        )),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_directory_of_the_agents_own_is_mounted_on() {
        let root = tempfile::tempdir().unwrap();
        let bare = root.path().join("bare");
        std::fs::create_dir(&bare).unwrap();
        check_bare(&bare).unwrap();
        assert!(!is_mount_point(&bare).unwrap());

        let link = root.path().join("link");
        std::os::unix::fs::symlink(&bare, &link).unwrap();
        let e = check_bare(&link).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        assert!(!is_mount_point(&link).unwrap(), "a link is never followed");

        std::fs::write(bare.join("file"), b"x").unwrap();
        let e = check_bare(&bare).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
        assert!(check_bare(&root.path().join("missing")).is_err());
    }

    /// As root (where the agent mounts), a run directory's tmpfs is full at its size and goes
    /// with one unmount; as anyone else, mounting is refused.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_tmpfs_is_full_at_its_size_and_unmounts() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        let mounted = mount_tmpfs(&dir, 64 << 10, 16, (61_000, 61_000));
        if rustix::process::geteuid().as_raw() != 0 {
            assert!(mounted.is_err(), "only root mounts");
            return;
        }
        mounted.unwrap();
        let cleanup = Unmount(dir.clone());
        assert!(is_tmpfs_mount(&dir).unwrap());
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o777), (61_000, 0o700));
        let full = std::fs::write(dir.join("big"), vec![0_u8; 1 << 20]).unwrap_err();
        assert_eq!(full.raw_os_error(), Some(28), "ENOSPC: {full}");
        drop(cleanup);
        assert!(!is_mount_point(&dir).unwrap());
        assert!(!dir.join("big").exists(), "its files went with it");
    }

    /// Unmounts even when the test fails.
    #[cfg(target_os = "linux")]
    struct Unmount(std::path::PathBuf);

    #[cfg(target_os = "linux")]
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = unmount_all(&self.0);
        }
    }

    #[test]
    fn unmounting_what_isnt_mounted_does_nothing() {
        let root = tempfile::tempdir().unwrap();
        unmount_all(&root.path().join("missing")).unwrap();
        unmount_all(root.path()).unwrap();
        assert!(root.path().exists());
    }
}
