//! A workload's disk: an ext4 filesystem in an image file of the agent's own (mode 0600, in a
//! directory no workload sees), as large as its class's limit and all of it set aside when it
//! is made, so that workloads together never take more of the machine than their limits say;
//! loop-mounted on the workload's data directory. Its root is the workload user's.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// The kernel's loop block devices.
#[cfg(target_os = "linux")]
const LOOP_MAJOR: u32 = 7;
const MKFS_LIMIT: Duration = Duration::from_secs(120);
const MOUNT_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("`{command}` failed: {detail}")]
    Tool { command: String, detail: String },
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ImageError {
    let path = path.to_path_buf();
    move |source| ImageError::Io { what, path, source }
}

/// Makes the image at `image`: `bytes` large, set aside on the machine, an empty ext4
/// filesystem whose root `owner` owns. Written under a temporary name and renamed, so a
/// crash never leaves half an image under the real one.
pub async fn make(image: &Path, bytes: u64, (uid, gid): (u32, u32)) -> Result<(), ImageError> {
    let tmp = image.with_extension("making");
    let _ = std::fs::remove_file(&tmp);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io_error("can't create the disk image", &tmp))?;
    let made = async {
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, bytes)
            .map_err(|e| io_error("can't set the disk's space aside", &tmp)(e.into()))?;
        file.sync_all()
            .map_err(io_error("can't write the disk image", &tmp))?;
        let owner = format!("root_owner={uid}:{gid},nodiscard");
        // No blocks reserved for root (the workload isn't), no discard (which would punch the
        // set-aside space out of the image again).
        let args = ["-q", "-F", "-m", "0", "-E", &owner];
        run("mkfs.ext4", &args, &tmp, MKFS_LIMIT).await?;
        std::fs::rename(&tmp, image).map_err(io_error("can't name the disk image", image))
    };
    let result = made.await;
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Loop-mounts `image` on `dir` (a bare directory of the agent's own, checked by the caller):
/// nothing on it can be set-uid or a device. The loop device goes when it is unmounted.
pub async fn mount(image: &Path, dir: &Path) -> Result<(), ImageError> {
    let options = ["-t", "ext4", "-o", "loop,nosuid,nodev,noatime", "--"];
    let mut args: Vec<&std::ffi::OsStr> = options.iter().map(std::ffi::OsStr::new).collect();
    args.push(image.as_os_str());
    run_os("mount", &args, dir, MOUNT_LIMIT).await
}

/// The image file of the loop device mounted on `dir`, if one is (`None` for a plain
/// directory or another kind of filesystem). `dir` itself is never followed.
#[cfg(target_os = "linux")]
pub fn backing_file(dir: &Path) -> io::Result<Option<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    // `rustix::fs::major` takes a `dev_t`: a u64 on Linux, an i32 on macOS.
    let dev = std::fs::symlink_metadata(dir)?.dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    if major != LOOP_MAJOR {
        return Ok(None);
    }
    let sys = format!("/sys/dev/block/{major}:{minor}/loop/backing_file");
    match std::fs::read_to_string(sys) {
        Ok(name) => Ok(Some(PathBuf::from(name.trim_end_matches('\n')))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Loop-mounted disks are Linux's (the agent can't mount elsewhere): nothing is ever a loop
/// device's here. A missing `dir` is still an error, as on Linux.
#[cfg(not(target_os = "linux"))]
pub fn backing_file(dir: &Path) -> io::Result<Option<PathBuf>> {
    std::fs::symlink_metadata(dir)?;
    Ok(None)
}

async fn run(program: &str, args: &[&str], last: &Path, limit: Duration) -> Result<(), ImageError> {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    run_os(program, &args, last, limit).await
}

/// Runs `program args… last` for at most `limit`; its first line of complaint if it fails.
async fn run_os(
    program: &str,
    args: &[&std::ffi::OsStr],
    last: &Path,
    limit: Duration,
) -> Result<(), ImageError> {
    let command = format!("{program} … {}", last.display());
    let failed = |detail: String| ImageError::Tool {
        command: command.clone(),
        detail,
    };
    let child = Command::new(program)
        .args(args)
        .arg(last)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(e.to_string()))?;
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| failed(format!("still running after {limit:?}")))?
        .map_err(|e| failed(e.to_string()))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let line = said.lines().next().unwrap_or_default();
    Err(failed(format!("{}: {line}", out.status)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// An image is set aside in full and holds an ext4 filesystem; where mkfs fails nothing
    /// is left under the image's name.
    #[tokio::test]
    async fn an_image_is_set_aside_in_full_and_formatted() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("w1.img");
        make(&image, 32 << 20, (61_000, 61_000)).await.unwrap();
        let meta = std::fs::symlink_metadata(&image).unwrap();
        assert_eq!(meta.len(), 32 << 20);
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert!(meta.blocks() * 512 >= 32 << 20, "its blocks are set aside");
        let bytes = std::fs::read(&image).unwrap();
        // ext4's superblock magic, at 1024 + 0x38.
        assert_eq!(bytes[1024 + 0x38..1024 + 0x3a], [0x53, 0xef]);
        assert!(!dir.path().join("w1.making").exists());

        let too_small = dir.path().join("w2.img");
        let refused = make(&too_small, 4096, (61_000, 61_000)).await;
        assert!(
            matches!(refused, Err(ImageError::Tool { .. })),
            "{refused:?}"
        );
        assert!(!too_small.exists() && !dir.path().join("w2.making").exists());
    }

    #[test]
    fn a_plain_directory_has_no_backing_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(backing_file(dir.path()).unwrap(), None);
    }
}
