//! Files from the models directory: what resolves inside it is copied and validated; every
//! way out of it is refused.

use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};

use super::*;
use einsora_core::agent::StatusCode;

use crate::models::fetch::read_manifest;
use crate::models::{Limits, MODEL_FILE, ModelProblem, ModelSource, PreparedModel, prepare};

struct Dirs {
    _root: tempfile::TempDir,
    models: PathBuf,
    private: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(models.join("sub")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(models.join("tiny.gguf"), Gguf::valid().bytes()).unwrap();
    std::fs::write(outside.join("secret.gguf"), Gguf::valid().bytes()).unwrap();
    Dirs {
        private: root.path().join("workload/model"),
        models,
        outside,
        _root: root,
    }
}

async fn from(d: &Dirs, location: &str) -> Result<PreparedModel, ModelProblem> {
    from_checked(d, location, None).await
}

async fn from_checked(
    d: &Dirs,
    location: &str,
    sha256: Option<&str>,
) -> Result<PreparedModel, ModelProblem> {
    let source = ModelSource::parse(location, sha256)?;
    prepare(&source, Some(&d.models), &d.private, &Limits::default()).await
}

fn nothing_served(private: &Path) {
    assert!(!private.join(MODEL_FILE).exists());
    if let Ok(entries) = std::fs::read_dir(private) {
        let left: Vec<_> = entries.map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

#[tokio::test]
async fn a_file_in_the_models_dir_is_copied_validated_and_reused() {
    let d = dirs();
    let bytes = Gguf::valid().bytes();
    let model = from(&d, "tiny.gguf").await.unwrap();
    assert_eq!(model.path, d.private.join(MODEL_FILE));
    assert_eq!(model.sha256, sha256_hex(&bytes));
    assert_eq!(model.size, bytes.len() as u64);
    assert_eq!(model.summary.architecture.as_deref(), Some("llama"));
    assert!(!model.reused);
    assert_eq!(std::fs::read(&model.path).unwrap(), bytes);
    // A copy, not a link to the shared original; owner-only storage.
    assert_eq!(std::fs::metadata(&model.path).unwrap().nlink(), 1);
    assert_eq!(std::fs::metadata(&model.path).unwrap().mode() & 0o077, 0);
    assert_eq!(std::fs::metadata(&d.private).unwrap().mode() & 0o777, 0o700);

    let manifest = read_manifest(&d.private).unwrap();
    assert_eq!(manifest.source, "file:tiny.gguf");
    assert_eq!(manifest.sha256, model.sha256);
    assert_eq!(manifest.size, model.size);
    assert!(
        time::OffsetDateTime::parse(
            &manifest.fetched_at,
            &time::format_description::well_known::Rfc3339
        )
        .is_ok()
    );

    let again = from(&d, "tiny.gguf").await.unwrap();
    assert!(again.reused);
    assert_eq!(again.sha256, model.sha256);
    assert_eq!(read_manifest(&d.private).unwrap(), manifest);
    // However it's spelled, and with the checksum it has: still reused.
    assert!(from(&d, "file:./tiny.gguf").await.unwrap().reused);
    let with_sum = from_checked(&d, "tiny.gguf", Some(&model.sha256.to_uppercase())).await;
    assert!(with_sum.unwrap().reused);
    // Another model replaces it.
    let mut other = Gguf::valid();
    other.kv[1].2 = string(b"other");
    std::fs::write(d.models.join("sub/other.gguf"), other.bytes()).unwrap();
    let replaced = from(&d, "sub/other.gguf").await.unwrap();
    assert!(!replaced.reused);
    assert_eq!(std::fs::read(&replaced.path).unwrap(), other.bytes());
    assert_eq!(
        read_manifest(&d.private).unwrap().source,
        "file:sub/other.gguf"
    );
}

#[tokio::test]
async fn a_changed_original_is_copied_again() {
    let d = dirs();
    let first = from(&d, "tiny.gguf").await.unwrap();
    let mut changed = Gguf::valid();
    changed.kv[1].2 = string(b"other");
    std::fs::write(d.models.join("tiny.gguf"), changed.bytes()).unwrap();
    let second = from(&d, "tiny.gguf").await.unwrap();
    assert!(!second.reused);
    assert_ne!(second.sha256, first.sha256);
    assert_eq!(second.sha256, sha256_hex(&changed.bytes()));
}

#[tokio::test]
async fn the_forms_of_a_file_source() {
    let d = dirs();
    std::fs::write(d.models.join("sub/in.gguf"), Gguf::valid().bytes()).unwrap();
    symlink("sub/in.gguf", d.models.join("alias.gguf")).unwrap();
    let inside = d.models.join("sub/in.gguf");
    for location in [
        "sub/in.gguf".to_owned(),
        "file:sub/in.gguf".to_owned(),
        "./sub/in.gguf".to_owned(),
        "alias.gguf".to_owned(),
        inside.display().to_string(),
        format!("file://{}", inside.display()),
    ] {
        from(&d, &location)
            .await
            .unwrap_or_else(|e| panic!("{location}: {e}"));
    }
}

#[tokio::test]
async fn every_way_out_of_the_models_dir_is_refused() {
    let d = dirs();
    symlink(d.outside.join("secret.gguf"), d.models.join("escape.gguf")).unwrap();
    symlink(&d.outside, d.models.join("elsewhere")).unwrap();
    let secret = d.outside.join("secret.gguf").display().to_string();
    let via_dotdot = format!("{}/../outside/secret.gguf", d.models.display());
    for location in [
        "../outside/secret.gguf",
        "sub/../tiny.gguf",
        "file:../outside/secret.gguf",
        &secret,
        &format!("file://{secret}"),
        &via_dotdot,
        "/etc/passwd",
        "escape.gguf",
        "elsewhere/secret.gguf",
        ".",
        "sub/..",
    ] {
        let problem = from(&d, location).await.unwrap_err();
        assert_eq!(problem, ModelProblem::OutsideModelsDir, "{location}");
        assert_eq!(problem.status(), StatusCode::ModelRefused);
        nothing_served(&d.private);
    }
}

/// A symlink swapped in on the way after the path was resolved leads nowhere.
#[cfg(target_os = "linux")]
#[test]
fn a_symlink_swapped_in_later_is_refused() {
    use crate::models::source::{open_resolved, resolve_file};
    let d = dirs();
    std::fs::write(d.models.join("sub/in.gguf"), b"x").unwrap();
    let (root, resolved) = resolve_file(Path::new("sub/in.gguf"), Some(&d.models)).unwrap();
    assert!(open_resolved(&root, &resolved).is_ok());
    // Now `sub` leads outside, where a file of the same name waits.
    std::fs::rename(d.models.join("sub"), d.models.join("old")).unwrap();
    symlink(&d.outside, d.models.join("sub")).unwrap();
    std::fs::write(d.outside.join("in.gguf"), b"secret").unwrap();
    let err = open_resolved(&root, &resolved).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::LOOP.raw_os_error())
    );
}

#[tokio::test]
async fn what_isnt_a_regular_file_is_refused() {
    let d = dirs();
    assert_eq!(from(&d, "sub").await.unwrap_err(), ModelProblem::NotAFile);
    let fifo = d.models.join("pipe.gguf");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    // Refused, without blocking on the open.
    let problem = tokio::time::timeout(std::time::Duration::from_secs(5), from(&d, "pipe.gguf"))
        .await
        .expect("a FIFO doesn't block");
    assert_eq!(problem.unwrap_err(), ModelProblem::NotAFile);
    let missing = from(&d, "missing.gguf").await.unwrap_err();
    assert_eq!(missing, ModelProblem::NotFound);
    assert_eq!(missing.status(), StatusCode::ModelUnavailable);
    nothing_served(&d.private);
}

#[tokio::test]
async fn no_models_dir_no_file_sources() {
    let d = dirs();
    let source = ModelSource::parse("tiny.gguf", None).unwrap();
    let problem = prepare(&source, None, &d.private, &Limits::default()).await;
    assert_eq!(problem.unwrap_err(), ModelProblem::NoModelsDir);
    let gone = d.models.join("gone");
    let problem = prepare(&source, Some(&gone), &d.private, &Limits::default()).await;
    assert_eq!(problem.unwrap_err(), ModelProblem::NoModelsDir);
}

#[tokio::test]
async fn checksum_size_and_gguf_failures_leave_nothing() {
    let d = dirs();
    let wrong = "ab".repeat(32);
    let problem = from_checked(&d, "tiny.gguf", Some(&wrong))
        .await
        .unwrap_err();
    assert_eq!(
        problem,
        ModelProblem::ChecksumMismatch {
            expected: wrong,
            actual: sha256_hex(&Gguf::valid().bytes())
        }
    );
    assert_eq!(problem.status(), StatusCode::ModelChecksumMismatch);
    nothing_served(&d.private);

    let source = ModelSource::parse("tiny.gguf", None).unwrap();
    let small = Limits {
        max_file_size: 100,
        ..Limits::default()
    };
    let problem = prepare(&source, Some(&d.models), &d.private, &small).await;
    assert_eq!(problem.unwrap_err(), ModelProblem::TooLarge { limit: 100 });
    nothing_served(&d.private);

    let mut bad = Gguf::valid();
    bad.tensors[0].name = b"../../etc/passwd".to_vec();
    std::fs::write(d.models.join("bad.gguf"), bad.bytes()).unwrap();
    let problem = from(&d, "bad.gguf").await.unwrap_err();
    assert!(matches!(problem, ModelProblem::Invalid(_)), "{problem}");
    assert_eq!(problem.status(), StatusCode::ModelInvalid);
    assert_eq!(problem.status().as_str(), "model_invalid");
    nothing_served(&d.private);

    // A refused model leaves the one already there as it was.
    from(&d, "tiny.gguf").await.unwrap();
    let problem = from(&d, "bad.gguf").await.unwrap_err();
    assert!(matches!(problem, ModelProblem::Invalid(_)));
    assert!(from(&d, "tiny.gguf").await.unwrap().reused);
}

#[test]
fn sources_parse_and_hide_their_secrets() {
    let bad = |location: &str, sha: Option<&str>| {
        matches!(
            ModelSource::parse(location, sha),
            Err(ModelProblem::BadSource(_))
        )
    };
    assert!(bad("s3://bucket/model.gguf", None));
    assert!(bad("ftp://host/model.gguf", None));
    assert!(bad("", None));
    assert!(bad("file://host/model.gguf", None));
    assert!(bad("https://user:pw@host/model.gguf", None));
    assert!(bad("https:///model.gguf", None));
    assert!(bad("tiny.gguf", Some("abc")));
    assert!(bad("tiny.gguf", Some(&"g".repeat(64))));
    let url = ModelSource::parse(
        "HTTPS://Models.Example:8443/org/m.gguf?X-Signature=s3cr3t#frag",
        Some(&"AB".repeat(32)),
    )
    .unwrap();
    assert_eq!(url.to_string(), "https://models.example:8443/org/m.gguf");
    assert!(!format!("{url:?}").contains("s3cr3t"));
    assert_eq!(url.sha256(), Some("ab".repeat(32).as_str()));
    let v6 = ModelSource::parse("https://[::1]/m.gguf", None).unwrap();
    assert_eq!(v6.to_string(), "https://[::1]:443/m.gguf");
}

#[test]
fn every_problem_has_a_status_and_one_line() {
    use crate::models::GgufProblem;
    let problems = [
        ModelProblem::BadSource("x"),
        ModelProblem::NoModelsDir,
        ModelProblem::OutsideModelsDir,
        ModelProblem::NotFound,
        ModelProblem::NotAFile,
        ModelProblem::TooLarge { limit: 1 },
        ModelProblem::ChecksumMismatch {
            expected: "a".into(),
            actual: "b".into(),
        },
        ModelProblem::Download("h:1: refused".into()),
        ModelProblem::Storage("disk full".into()),
        ModelProblem::Invalid(GgufProblem::BadMagic),
    ];
    for p in problems {
        let line = p.to_string();
        assert!(!line.contains('\n'), "{line}");
        let status = p.status();
        assert!(status.as_str().starts_with("model_"));
        assert!(status.reason().starts_with("its "));
    }
}
