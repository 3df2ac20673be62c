//! The .rpm: rpm's own listings, then installed into a throwaway root (the project's base image's
//! files) with its scriptlets run there, and erased.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::built::{VERSION, built, ok, run};

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
    assert_eq!(config.trim(), "/etc/einsora/einsora.env");
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

#[test]
fn the_rpm_installs_into_a_throwaway_root_and_erases_keeping_data() {
    let root = tempfile::Builder::new()
        .prefix("einsora-rpm-root-")
        .tempdir()
        .unwrap();
    throwaway_root(root.path());
    let r = root.path().to_str().unwrap();
    let rpm = built().rpm();
    ok("rpm", &["--root", r, "--initdb"]);
    // --nodeps: this root's packages are Debian's, which rpm's database doesn't know.
    let installed = ok(
        "rpm",
        &["--root", r, "-i", "--nodeps", rpm.to_str().unwrap()],
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
    let settings = std::fs::metadata(root.path().join("etc/einsora/einsora.env")).unwrap();
    assert_eq!((settings.uid(), settings.mode() & 0o777), (0, 0o640));
    let version = ok("chroot", &[r, "/usr/bin/einsora", "--version"]);
    assert!(version.starts_with("einsora "), "{version}");

    // Erasing removes the program and keeps the data.
    std::fs::write(root.path().join("var/lib/einsora/einsora.db"), "data").unwrap();
    ok("rpm", &["--root", r, "-e", "einsora"]);
    assert!(!root.path().join("usr/bin/einsora").exists());
    assert!(root.path().join("var/lib/einsora/einsora.db").exists());
}
