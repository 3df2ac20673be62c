//! A small throwaway ext4 filesystem, loop-mounted on a temporary directory, for a test to put
//! a whole installation on; unmounted (with everything mounted below it) and deleted when
//! dropped, even when the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::mounts::unmount_all_under;

pub struct Throwaway {
    /// Holds the image file and the mount point, on the machine's own disk.
    _holder: tempfile::TempDir,
    mount: PathBuf,
}

impl Throwaway {
    /// `bytes` large (sparse: only what is written takes the machine's disk).
    pub fn new(bytes: u64) -> Throwaway {
        let holder = tempfile::tempdir().unwrap();
        let image = holder.path().join("fs.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0"])
            .arg(&image));
        let mount = holder.path().join("mnt");
        std::fs::create_dir(&mount).unwrap();
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&mount));
        // Mounted: from here on, dropping it unmounts it.
        Throwaway {
            _holder: holder,
            mount,
        }
    }

    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// Bytes still free for an unprivileged writer.
    pub fn available(&self) -> u64 {
        let out = Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(&self.mount)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines().nth(1).unwrap().trim().parse().unwrap()
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        unmount_all_under(&self.mount);
        let left = crate::harness::mounts::mounts_under(&self.mount);
        if !left.is_empty() {
            eprintln!("still mounted after the test: {left:?}");
        }
        // Then `holder` goes, and the image with it.
    }
}

fn run(command: &mut Command) {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
