//! `einsora images build` run the way the README says, `sudo ./target/release/einsora images
//! build`: here the debug binary the other tests use, as root. Each image carries a label of
//! its inputs and is rebuilt only when they change, and the downloads it was built from are
//! kept in the build's cache; on a machine that built them (`./scripts/test` runs `images/build
//! all`, into `target/images-cache`) this build, given that cache, finds them and is quick.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::{Einsora, finish, stderr};

/// What `einsora images build` makes, by tag.
const IMAGES: [&str; 3] = [
    "einsora/base:bookworm",
    "einsora/notebook:local",
    "einsora/llamacpp:local",
];

/// The cache `images/build` fills by default (EINSORA_IMAGES_CACHE when set).
fn images_cache() -> PathBuf {
    std::env::var_os("EINSORA_IMAGES_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/images-cache"))
}

/// The label of the inputs `tag` was built from; `None` if there is no such image.
fn inputs_label(tag: &str) -> Option<String> {
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "-f",
            r#"{{index .Config.Labels "einsora.inputs"}}"#,
            tag,
        ])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn einsora_images_build_as_the_readme_says() {
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    assert_eq!(
        uid, 0,
        "the README runs it with sudo: run this test as root"
    );
    let cache = images_cache();
    assert!(
        cache.join("wheels").is_dir(),
        "no image build cache at {}: ./scripts/test builds the images into it",
        cache.display()
    );
    let e = Einsora::new();
    // The build caches under <data dir>/images-cache: this installation's is that cache.
    std::os::unix::fs::symlink(&cache, e.dir().join("images-cache")).unwrap();
    // Cached, the build takes seconds; a change to an image's recipe rebuilds it offline.
    let out = finish(
        e.spawn(&["images", "build"], &[]),
        Duration::from_secs(1200),
    );
    let said = stderr(&out);
    assert!(out.status.success(), "{}\n{said}", out.status);
    for tag in IMAGES {
        let cached = format!("{tag}: cached");
        let built = format!("{tag}: docker build");
        let bootstrapped = format!("{tag}: debootstrap");
        assert!(
            said.lines()
                .any(|l| l.ends_with(&cached) || l.contains(&built) || l.contains(&bootstrapped)),
            "{tag} was neither found cached nor built:\n{said}"
        );
        assert!(
            said.contains(&format!("{tag} done in ")),
            "{tag}'s stage didn't finish:\n{said}"
        );
        let label = inputs_label(tag);
        assert!(
            label.as_ref().is_some_and(|l| !l.is_empty()),
            "{tag} exists, labelled with its inputs: {label:?}"
        );
    }
}
