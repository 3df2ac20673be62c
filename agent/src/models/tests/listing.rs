//! The model files a machine offers: valid GGUF files it can serve, by the path an endpoint
//! names; never a broken file, a symlink, a name an endpoint can't use, or more than the bound.

use std::os::unix::fs::symlink;

use super::*;
use crate::models::Limits;
use crate::models::listing::{Listing, MAX_LISTED};
use einsora_core::machine::ModelFile;

fn paths(listed: &[ModelFile]) -> Vec<&str> {
    listed.iter().map(|m| m.path.as_str()).collect()
}

#[test]
fn only_valid_gguf_files_an_endpoint_can_name_are_offered() {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(models.join("team/deep/er/still/too-deep")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let valid = Gguf::valid().bytes();
    for name in [
        "tiny.gguf",
        "team/chat.Q4_K_M.gguf",
        "team/deep/er/still/ok.gguf",
        // Five directories down: past the walk's depth.
        "team/deep/er/still/too-deep/hidden.gguf",
        // Names an endpoint can't use, and a file that isn't .gguf.
        "with space.gguf",
        "tiny.bin",
    ] {
        std::fs::write(models.join(name), &valid).unwrap();
    }
    std::fs::write(models.join("broken.gguf"), b"GGUF but not really").unwrap();
    let mut truncated = valid.clone();
    truncated.truncate(valid.len() / 2);
    std::fs::write(models.join("truncated.gguf"), truncated).unwrap();
    std::fs::write(outside.join("secret.gguf"), &valid).unwrap();
    symlink(outside.join("secret.gguf"), models.join("link.gguf")).unwrap();
    symlink(&outside, models.join("linked-dir")).unwrap();
    std::os::unix::net::UnixListener::bind(models.join("socket.gguf")).unwrap();

    let mut listing = Listing::default();
    let listed = listing.scan(&models, &Limits::default());
    assert_eq!(
        paths(&listed),
        [
            "team/chat.Q4_K_M.gguf",
            "team/deep/er/still/ok.gguf",
            "tiny.gguf"
        ]
    );
    assert!(listed.iter().all(|m| m.size_bytes == valid.len() as u64));

    // A file that changes is looked at again; one that goes is no longer offered.
    std::fs::write(models.join("tiny.gguf"), b"no longer a model").unwrap();
    std::fs::remove_file(models.join("team/chat.Q4_K_M.gguf")).unwrap();
    std::fs::write(models.join("broken.gguf"), &valid).unwrap();
    let listed = listing.scan(&models, &Limits::default());
    assert_eq!(
        paths(&listed),
        ["broken.gguf", "team/deep/er/still/ok.gguf"]
    );

    assert!(
        listing
            .scan(&root.path().join("absent"), &Limits::default())
            .is_empty()
    );
}

#[test]
fn the_list_is_bounded() {
    let models = tempfile::tempdir().unwrap();
    let valid = Gguf::valid().bytes();
    for i in 0..MAX_LISTED + 10 {
        std::fs::write(models.path().join(format!("m{i:04}.gguf")), &valid).unwrap();
    }
    let listed = Listing::default().scan(models.path(), &Limits::default());
    assert_eq!(listed.len(), MAX_LISTED);
    assert_eq!(listed[0].path, "m0000.gguf");
}
