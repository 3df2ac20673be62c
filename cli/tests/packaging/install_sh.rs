//! install.sh against a local HTTP server (in a container of the base image with curl, on its
//! loopback): it installs the .deb, or the tarball where there is no package manager, and
//! refuses a 404, a wrong checksum, a corrupted artifact and an unknown architecture, each with
//! its line and nothing installed.

use std::path::Path;

use super::built::{OLDER, VERSION, built, repo};
use super::container::Container;

/// What the server serves: `good/` a release, `badsum/` a release whose SHA256SUMS names a
/// wrong hash for the .deb, `corrupt/` one whose .deb was altered after its sum was taken,
/// `missing/` a SHA256SUMS whose .deb isn't there, `hostile/` a SHA256SUMS whose names try a
/// path, a command and an uppercase hash, `twice/` one naming two .debs; and install.sh.
fn served(dir: &Path) {
    let release = &built().release;
    let deb = format!("einsora_{VERSION}_amd64.deb");
    let sums = std::fs::read_to_string(release.join("SHA256SUMS")).unwrap();
    for case in ["good", "badsum", "corrupt", "missing", "hostile", "twice"] {
        std::fs::create_dir(dir.join(case)).unwrap();
    }
    for entry in std::fs::read_dir(release).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join("good").join(path.file_name().unwrap())).unwrap();
    }
    let wrong: String = sums
        .lines()
        .map(|l| match l.split_once("  ") {
            Some((_, name)) if name == deb => format!("{}  {name}\n", "0".repeat(64)),
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(dir.join("badsum/SHA256SUMS"), wrong).unwrap();
    std::fs::copy(release.join(&deb), dir.join("badsum").join(&deb)).unwrap();
    let mut bytes = std::fs::read(release.join(&deb)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(dir.join("corrupt").join(&deb), bytes).unwrap();
    std::fs::write(dir.join("corrupt/SHA256SUMS"), &sums).unwrap();
    std::fs::write(dir.join("missing/SHA256SUMS"), &sums).unwrap();
    let hash = sums
        .lines()
        .find_map(|l| l.strip_suffix(&format!("  {deb}")))
        .unwrap();
    let hostile = format!(
        "{hash}  ../{deb}\n{hash}  einsora_$(touch${{IFS}}/tmp/pwned)_amd64.deb\n\
         {}  {deb}\n{hash}  sub/{deb}\n",
        hash.to_uppercase()
    );
    std::fs::write(dir.join("hostile/SHA256SUMS"), hostile).unwrap();
    let twice = format!("{hash}  {deb}\n{hash}  einsora_0.0.9_amd64.deb\n");
    std::fs::write(dir.join("twice/SHA256SUMS"), twice).unwrap();
    std::fs::copy(repo().join("install.sh"), dir.join("install.sh")).unwrap();
    let older = built()
        .dir
        .path()
        .join(OLDER)
        .join(format!("einsora_{OLDER}_amd64.deb"));
    std::fs::copy(older, dir.join("older.deb")).unwrap();
}

const SERVER: &str = "http://127.0.0.1:8000";

fn install(c: &Container, base: &str, extra: &str) -> (bool, String, String) {
    c.sh(&format!(
        "{extra} EINSORA_INSTALL_BASE={SERVER}/{base} sh /pkgs/install.sh"
    ))
}

fn refused(c: &Container, base: &str, extra: &str, line: &str) {
    let (success, out, err) = install(c, base, extra);
    assert!(!success, "installed from {base}:\n{out}\n{err}");
    assert!(err.contains(line), "{line:?} for {base}, it said:\n{err}");
    c.fails("dpkg -s einsora >/dev/null 2>&1 || test -e /usr/local/bin/einsora");
}

#[test]
fn install_sh_installs_the_package_and_refuses_what_it_cant_verify() {
    let dir = tempfile::Builder::new()
        .prefix("einsora-install-sh-")
        .tempdir()
        .unwrap();
    served(dir.path());
    let c = Container::start("einsora/pkgtest:bookworm", "install-sh", dir.path());
    c.spawn("exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /pkgs");
    c.wait_for(
        "the artifacts' server",
        &format!("curl -fs {SERVER}/good/SHA256SUMS"),
    );
    let deb = format!("einsora_{VERSION}_amd64.deb");

    refused(
        &c,
        "nowhere",
        "",
        &format!("einsora install: can't download {SERVER}/nowhere/SHA256SUMS"),
    );
    refused(
        &c,
        "missing",
        "",
        &format!("einsora install: can't download {SERVER}/missing/{deb}"),
    );
    refused(
        &c,
        "badsum",
        "",
        &format!("einsora install: checksum mismatch for {deb}: expected 0000"),
    );
    refused(
        &c,
        "corrupt",
        "",
        &format!("einsora install: checksum mismatch for {deb}"),
    );
    refused(
        &c,
        "hostile",
        "",
        "einsora install: http://127.0.0.1:8000/hostile has no deb for Linux x86_64 (none named einsora_*_amd64.deb in SHA256SUMS)",
    );
    c.fails("test -e /tmp/pwned");
    refused(
        &c,
        "twice",
        "",
        "einsora install: http://127.0.0.1:8000/twice lists more than one einsora_*_amd64.deb in SHA256SUMS",
    );
    for (base, line) in [
        (
            "http://einsora.invalid/release",
            "plain http only from this machine (127.0.0.1, localhost); use https:// or a directory",
        ),
        ("pkgs/good", "an https:// URL or an absolute directory"),
    ] {
        let err = c.fails(&format!("EINSORA_INSTALL_BASE={base} sh /pkgs/install.sh"));
        assert!(err.contains(line), "{base}: {err}");
    }
    c.ok("mkdir -p /tmp/riscv && printf '#!/bin/sh\\n[ \"$1\" = -m ] && echo riscv64 || /usr/bin/uname \"$@\"\\n' > /tmp/riscv/uname && chmod +x /tmp/riscv/uname");
    refused(
        &c,
        "good",
        "PATH=/tmp/riscv:$PATH",
        "einsora install: unsupported architecture riscv64: Einsora is built for x86_64 and aarch64",
    );

    // --dry-run says what it would do and changes nothing.
    let dry = c.ok(&format!(
        "EINSORA_INSTALL_BASE={SERVER}/good sh /pkgs/install.sh --dry-run"
    ));
    assert!(
        dry.contains(&format!("would download {SERVER}/good/{deb}")),
        "{dry}"
    );
    c.fails("dpkg -s einsora >/dev/null 2>&1");

    // With no package manager, the tarball goes into /usr/local.
    c.ok("mv /usr/bin/dpkg /usr/bin/dpkg.away");
    let (success, out, err) = install(&c, "good", "");
    c.ok("mv /usr/bin/dpkg.away /usr/bin/dpkg");
    assert!(success, "{out}\n{err}");
    assert!(
        out.contains("einsora setup --email you@example.com, then einsora up"),
        "{out}"
    );
    c.ok("test -f /usr/local/share/man/man1/einsora.1.gz");
    c.ok("test -f /usr/local/share/bash-completion/completions/einsora");
    assert!(
        c.ok("/usr/local/bin/einsora --version")
            .starts_with("einsora ")
    );
    c.ok("rm -r /usr/local/bin/einsora /usr/local/share/einsora");

    // With apt, the .deb, as an upgrade over an older package whose settings file both the
    // operator and the new package changed: the operator's is kept and the new one put beside
    // it, with no question asked (`curl | sh` has no terminal). Its download goes into a
    // directory whose name has a space.
    c.ok(&format!(
        "dpkg-deb -R /pkgs/older.deb /tmp/older && \
         echo '# an older default' >> /tmp/older/etc/einsora/einsora.env && \
         dpkg-deb -b /tmp/older /tmp/older.deb >/dev/null && dpkg -i /tmp/older.deb && \
         echo EINSORA_LOG=debug >> /etc/einsora/einsora.env && \
         dpkg -s einsora | grep -q 'Version: {OLDER}'"
    ));
    c.ok("mkdir -p '/tmp/with space'");
    let (success, out, err) = install(&c, "good", "TMPDIR='/tmp/with space'");
    assert!(success, "{out}\n{err}");
    assert!(out.contains("sudo einsora setup --email"), "{out}");
    assert!(
        c.ok("dpkg -s einsora")
            .contains(&format!("Version: {VERSION}"))
    );
    assert!(c.ok("command -v einsora").starts_with("/usr/bin/einsora"));
    assert!(
        c.ok("cat /etc/einsora/einsora.env")
            .contains("EINSORA_LOG=debug")
    );
    c.ok("test -f /etc/einsora/einsora.env.dpkg-dist");
}
