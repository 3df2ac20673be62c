//! The .rpm: rpm's own listings, then installed into a throwaway root (the project's base image's
//! files) with its scriptlets run there, and erased.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::built::{OLDER, VERSION, built, clean, ok, run};

#[test]
fn rpm_lists_the_package_its_files_and_scriptlets() {
    let rpm = built().rpm();
    let rpm = rpm.to_str().unwrap();
    let info = ok("rpm", &["-qip", rpm]);
    for expected in [
        "Name        : einsora",
        &format!("Version     : {VERSION}"),
        "License     : MIT",
        "Architecture: x86_64",
    ] {
        assert!(info.contains(expected), "{expected:?} in:\n{info}");
    }
    let files = ok("rpm", &["-qlp", rpm]);
    for expected in [
        "/usr/bin/einsora",
        "/usr/lib/systemd/system/einsora.service",
        "/etc/einsora/einsora.env",
        "/usr/share/man/man1/einsora.1.gz",
        "/usr/share/man/man1/einsora-up.1.gz",
        "/usr/share/bash-completion/completions/einsora",
        "/usr/share/zsh/site-functions/_einsora",
        "/usr/share/fish/vendor_completions.d/einsora.fish",
        "/var/lib/einsora",
        "/var/log/einsora",
    ] {
        assert!(
            files.lines().any(|l| l == expected),
            "{expected} in:\n{files}"
        );
    }
    let config = ok("rpm", &["-qcp", rpm]);
    assert_eq!(
        config.trim(),
        "/etc/einsora/einsora.env\n/etc/logrotate.d/einsora"
    );
    let scripts = ok("rpm", &["-qp", "--scripts", rpm]);
    assert!(scripts.contains("useradd --system"), "{scripts}");
}

/// The base image's files, for rpm --root: a shell, getent, useradd.
fn throwaway_root(dir: &Path) {
    let id = ok("docker", &["create", "einsora/base:bookworm"]);
    let id = id.trim();
    let exported = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("docker export {id} | tar -x -C {}", dir.display()))
        .status()
        .unwrap();
    let _ = run("docker", &["rm", id]);
    assert!(exported.success(), "exporting the base image");
}

/// /proc mounted in the throwaway root while it lives: `einsora setup` and the scriptlets'
/// `einsora migrate` run themselves again as the service's user, found by /proc/self/exe.
struct Proc(std::path::PathBuf);

impl Proc {
    fn mount(root: &Path) -> Proc {
        let at = root.join("proc");
        ok("mount", &["-t", "proc", "proc", at.to_str().unwrap()]);
        Proc(at)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = run("umount", &[self.0.to_str().unwrap()]);
    }
}

#[test]
fn the_rpm_installs_into_a_throwaway_root_upgrades_and_erases_keeping_data() {
    let root = tempfile::Builder::new()
        .prefix("einsora-rpm-root-")
        .tempdir()
        .unwrap();
    throwaway_root(root.path());
    let _proc = Proc::mount(root.path());
    let r = root.path().to_str().unwrap();
    let older = built()
        .dir
        .path()
        .join(OLDER)
        .join(format!("einsora-{OLDER}-1.x86_64.rpm"));
    ok("rpm", &["--root", r, "--initdb"]);
    // --nodeps: this root's packages are Debian's, which rpm's database doesn't know.
    let installed = ok(
        "rpm",
        &["--root", r, "-i", "--nodeps", older.to_str().unwrap()],
    );
    assert!(
        installed.contains("sudo einsora setup --email"),
        "{installed}"
    );
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).unwrap();
    let user = passwd
        .lines()
        .find(|l| l.starts_with("einsora:"))
        .expect("the %pre scriptlet made the einsora user");
    let uid: u32 = user.split(':').nth(2).unwrap().parse().unwrap();
    let data = std::fs::metadata(root.path().join("var/lib/einsora")).unwrap();
    assert_eq!((data.uid(), data.mode() & 0o777), (uid, 0o700));
    for (file, mode) in [
        ("etc/einsora/einsora.env", 0o640),
        ("etc/logrotate.d/einsora", 0o644),
    ] {
        let meta = std::fs::metadata(root.path().join(file)).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o777), (0, mode), "{file}");
    }

    // The owner, made in the service's data as its user.
    let setup = clean(&mut std::process::Command::new("chroot"))
        .args([
            r,
            "/usr/bin/einsora",
            "setup",
            "--email",
            "owner@example.com",
        ])
        .arg("--password-stdin")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let fed = {
        use std::io::Write;
        let mut setup = setup;
        setup
            .stdin
            .take()
            .unwrap()
            .write_all(b"a password long enough\n")
            .unwrap();
        setup.wait_with_output().unwrap()
    };
    let said = String::from_utf8_lossy(&fed.stderr);
    assert!(fed.status.success(), "{said}");
    let db = std::fs::metadata(root.path().join("var/lib/einsora/einsora.db")).unwrap();
    assert_eq!(db.uid(), uid, "the database is the service's");

    // The upgrade migrates, as the service's user, and keeps the data.
    let rpm = built().rpm();
    let upgraded = run(
        "rpm",
        &["--root", r, "-U", "--nodeps", rpm.to_str().unwrap()],
    );
    assert!(upgraded.0, "{upgraded:?}");
    assert!(
        upgraded.2.contains("is up to date (version"),
        "{upgraded:?}"
    );
    assert_eq!(
        ok("rpm", &["--root", r, "-q", "einsora"]).trim(),
        format!("einsora-{VERSION}-1.x86_64")
    );
    let version = ok("chroot", &[r, "/usr/bin/einsora", "--version"]);
    assert!(version.starts_with("einsora "), "{version}");

    // Erasing removes the program and keeps the data.
    ok("rpm", &["--root", r, "-e", "einsora"]);
    assert!(!root.path().join("usr/bin/einsora").exists());
    assert!(root.path().join("var/lib/einsora/einsora.db").exists());
}
