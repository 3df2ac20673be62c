//! Dialling a workload's Unix socket from the host. The socket lies in the workload's run
//! directory, which the workload can write: it can put a symlink, a hard link, a FIFO or another
//! process's socket under the name at any moment. So the name is never dialled. The socket's
//! inode is opened without following any link (`O_PATH | O_NOFOLLOW`, one component at a time
//! below a root the workload can't write), checked (a socket, one link only, owned by the run
//! directory's owner), and connected to through `/proc/self/fd/N`, which is that inode and no
//! other whatever the name points to by then. The listening process must be the run
//! directory's owner too (its peer credentials). docs/decisions/0007-workload-sockets.md says
//! why this and not a uid per workload. Where there is no `/proc` (macOS), the inode is pinned
//! by a hard link of the dialler's own instead ([`linked`]).

use std::fmt;
use std::path::{Component, Path};

use tokio::net::UnixStream;

/// Why a workload's socket was not dialled (or was hung up on at once).
#[derive(Debug)]
pub enum SocketRefused {
    /// The path isn't `<root>/<run dir>/<name>` with plain components.
    BadPath,
    /// Nothing there yet (a server still starting), or its server is gone.
    Absent,
    /// The run directory or the socket's name is a symlink, or not what it should be (a FIFO,
    /// a regular file, a directory in place of the socket).
    NotASocket,
    /// The socket has another name too: a hard link.
    HardLinked,
    /// The socket, or the process listening on it, belongs to someone other than the run
    /// directory's owner.
    WrongOwner { expected: u32, found: u32 },
    /// The socket didn't accept a connection.
    Io(std::io::Error),
}

impl SocketRefused {
    /// Whether the workload tampered with its socket (as opposed to a server not up yet).
    pub fn is_tampering(&self) -> bool {
        matches!(
            self,
            SocketRefused::NotASocket
                | SocketRefused::HardLinked
                | SocketRefused::WrongOwner { .. }
        )
    }
}

impl fmt::Display for SocketRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocketRefused::BadPath => f.write_str("not a workload socket's path"),
            SocketRefused::Absent => f.write_str("no socket there"),
            SocketRefused::NotASocket => f.write_str("not a socket (or a link to one)"),
            SocketRefused::HardLinked => f.write_str("a socket with more than one name"),
            SocketRefused::WrongOwner { expected, found } => {
                write!(f, "owned by uid {found}, not the workload's uid {expected}")
            }
            SocketRefused::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SocketRefused {}

/// Connects to the socket at `path` (`<root>/<run dir>/<name>`, `root` not writable by the
/// workload), if it is the run directory owner's own socket. Nothing else is ever connected
/// to: a refusal for tampering dials nothing.
pub async fn connect(path: &Path) -> Result<UnixStream, SocketRefused> {
    #[cfg(target_os = "linux")]
    let pinned = imp::pin(path)?;
    #[cfg(not(target_os = "linux"))]
    let pinned = pin_linked(path).await?;
    dial(&pinned.proc_path(), pinned.owner).await
}

/// [`connect`] by a hard link of the dialler's own, as on macOS: run on Linux by the tests.
#[cfg(test)]
async fn connect_linked(path: &Path) -> Result<UnixStream, SocketRefused> {
    let pinned = pin_linked(path).await?;
    dial(&pinned.proc_path(), pinned.owner).await
}

/// [`linked::pin`], on a blocking thread: it waits its turn.
#[cfg_attr(all(target_os = "linux", not(test)), allow(dead_code))]
async fn pin_linked(path: &Path) -> Result<linked::Pinned, SocketRefused> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || linked::pin(&path))
        .await
        .map_err(|e| SocketRefused::Io(std::io::Error::other(e)))?
}

/// Connects to the pinned socket at `at`, if its listener is `owner`.
async fn dial(at: &Path, owner: u32) -> Result<UnixStream, SocketRefused> {
    let stream = UnixStream::connect(at).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            SocketRefused::Absent
        }
        _ => SocketRefused::Io(e),
    })?;
    let peer = stream.peer_cred().map_err(SocketRefused::Io)?;
    if peer.uid() != owner {
        return Err(SocketRefused::WrongOwner {
            expected: owner,
            found: peer.uid(),
        });
    }
    Ok(stream)
}

/// `root`, the run directory's name and the socket's name, each a plain component.
fn split(path: &Path) -> Result<(&Path, &Path, &Path), SocketRefused> {
    if !path.is_absolute() || path.components().any(|c| !is_plain_or_root(c)) {
        return Err(SocketRefused::BadPath);
    }
    let name = plain(path.file_name().map(Path::new))?;
    let dir = path.parent().ok_or(SocketRefused::BadPath)?;
    let run_dir = plain(dir.file_name().map(Path::new))?;
    let root = dir.parent().ok_or(SocketRefused::BadPath)?;
    Ok((root, run_dir, name))
}

/// `p` if it is one plain component.
fn plain(p: Option<&Path>) -> Result<&Path, SocketRefused> {
    p.filter(|p| {
        matches!(
            p.components().collect::<Vec<_>>()[..],
            [Component::Normal(_)]
        )
    })
    .ok_or(SocketRefused::BadPath)
}

fn is_plain_or_root(c: Component<'_>) -> bool {
    matches!(c, Component::RootDir | Component::Normal(_))
}

#[cfg(target_os = "linux")]
mod imp {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::path::{Path, PathBuf};

    use rustix::fs::{CWD, FileType, Mode, OFlags, fstat, openat};
    use rustix::io::Errno;

    use super::{SocketRefused, split};

    /// The socket's inode, held open, and its run directory's owner.
    pub(super) struct Pinned {
        fd: OwnedFd,
        pub(super) owner: u32,
    }

    impl Pinned {
        /// The inode itself, as a path `connect` takes.
        pub(super) fn proc_path(&self) -> PathBuf {
            PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
        }
    }

    pub(super) fn pin(path: &Path) -> Result<Pinned, SocketRefused> {
        let (root, run_dir, name) = split(path)?;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let root = openat(CWD, root, flags | OFlags::DIRECTORY, Mode::empty()).map_err(absent)?;
        // Without O_DIRECTORY: a symlink opens as itself, and is refused below as one.
        let dir = openat(&root, run_dir, flags, Mode::empty()).map_err(absent)?;
        let dir_stat = fstat(&dir).map_err(absent)?;
        if FileType::from_raw_mode(dir_stat.st_mode) != FileType::Directory {
            return Err(SocketRefused::NotASocket);
        }
        let owner = dir_stat.st_uid;
        let fd = openat(&dir, name, flags, Mode::empty()).map_err(absent)?;
        let stat = fstat(&fd).map_err(absent)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Socket {
            return Err(SocketRefused::NotASocket);
        }
        if stat.st_nlink != 1 {
            return Err(SocketRefused::HardLinked);
        }
        if stat.st_uid != owner {
            return Err(SocketRefused::WrongOwner {
                expected: owner,
                found: stat.st_uid,
            });
        }
        Ok(Pinned { fd, owner })
    }

    fn absent(e: Errno) -> SocketRefused {
        match e {
            Errno::NOENT => SocketRefused::Absent,
            // A symlink where a directory was asked for, or a loop.
            Errno::NOTDIR | Errno::LOOP => SocketRefused::NotASocket,
            e => SocketRefused::Io(e.into()),
        }
    }
}

/// Elsewhere (macOS), the socket's inode is pinned by a hard link of the dialler's own.
#[cfg_attr(target_os = "linux", allow(dead_code))]
mod linked;

#[cfg(test)]
mod tests;
