//! Model directories as a hub publishes them, and every way one is refused: pickles, code,
//! missing files, bad headers, oversized files, links out of the models directory.

use std::path::Path;

use serde_json::json;

use super::*;
use crate::models::{ModelProblem, ModelSource};

/// A safetensors file of `tensors` (name, dtype, shape, byte count), its offsets as given.
fn safetensors(header: &serde_json::Value, data: usize) -> Vec<u8> {
    let header = header.to_string();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + data, 0);
    out
}

/// Two F16 tensors of 2×3 and 4, tiling 20 bytes.
fn good_weights() -> Vec<u8> {
    safetensors(
        &json!({
            "__metadata__": {"format": "pt"},
            "embed": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]},
            "norm": {"dtype": "BF16", "shape": [4], "data_offsets": [12, 20]},
        }),
        20,
    )
}

/// A small model directory: config, tokenizer, one safetensors file.
fn model_dir(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let config = json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama"});
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::write(dir.join("tokenizer.json"), r#"{"model": {}}"#).unwrap();
    std::fs::write(dir.join("tokenizer_config.json"), r#"{"bos_token": "<s>"}"#).unwrap();
    std::fs::write(dir.join("model.safetensors"), good_weights()).unwrap();
    std::fs::write(dir.join("README.md"), "# tiny").unwrap();
}

fn problem_of(dir: &Path) -> WeightsProblem {
    match validate_dir(dir, &DirLimits::default()) {
        Ok(summary) => panic!("accepted: {summary:?}"),
        Err(p) => p,
    }
}

#[test]
fn a_published_layout_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    model_dir(tmp.path());
    let summary = validate_dir(tmp.path(), &DirLimits::default()).unwrap();
    assert_eq!(summary.safetensors_files, 1);
    assert_eq!(summary.tensors, 2);
    assert_eq!(summary.files, 5);
    assert_eq!(summary.architecture.as_deref(), Some("LlamaForCausalLM"));
}

#[test]
fn sharded_weights_need_every_shard_their_index_names() {
    let tmp = tempfile::tempdir().unwrap();
    model_dir(tmp.path());
    std::fs::rename(
        tmp.path().join("model.safetensors"),
        tmp.path().join("model-00001-of-00002.safetensors"),
    )
    .unwrap();
    let index = json!({"weight_map": {
        "embed": "model-00001-of-00002.safetensors",
        "norm": "model-00002-of-00002.safetensors",
    }});
    std::fs::write(tmp.path().join(INDEX), index.to_string()).unwrap();
    let p = problem_of(tmp.path());
    assert!(
        matches!(p, WeightsProblem::IndexMissing(ref s) if s.contains("00002")),
        "{p}"
    );
    std::fs::write(
        tmp.path().join("model-00002-of-00002.safetensors"),
        good_weights(),
    )
    .unwrap();
    let summary = validate_dir(tmp.path(), &DirLimits::default()).unwrap();
    assert_eq!((summary.safetensors_files, summary.tensors), (2, 4));
}

#[test]
fn pickles_code_and_strange_entries_are_refused() {
    type Is = fn(&WeightsProblem) -> bool;
    let cases: [(&str, Is); 6] = [
        ("pytorch_model.bin", |p| {
            matches!(p, WeightsProblem::Pickled(_))
        }),
        ("consolidated.pth", |p| {
            matches!(p, WeightsProblem::Pickled(_))
        }),
        ("training_args.PKL", |p| {
            matches!(p, WeightsProblem::Pickled(_))
        }),
        ("modeling_evil.py", |p| {
            matches!(p, WeightsProblem::RemoteCode(_))
        }),
        ("run.sh", |p| matches!(p, WeightsProblem::Unexpected(_))),
        ("weights.gguf", |p| {
            matches!(p, WeightsProblem::Unexpected(_))
        }),
    ];
    for (name, expected) in cases {
        let tmp = tempfile::tempdir().unwrap();
        model_dir(tmp.path());
        std::fs::write(tmp.path().join(name), b"\x80\x04K.").unwrap();
        let p = problem_of(tmp.path());
        assert!(expected(&p), "{name}: {p}");
        assert!(p.to_string().contains(name), "names the file: {p}");
        assert_eq!(
            p.status(),
            einsora_core::agent::StatusCode::ModelRefused,
            "{name}"
        );
    }
    // Code named by a config, a subdirectory, a symlink.
    let tmp = tempfile::tempdir().unwrap();
    model_dir(tmp.path());
    let config = json!({"model_type": "evil", "auto_map": {"AutoModel": "modeling_evil.Evil"}});
    std::fs::write(tmp.path().join("config.json"), config.to_string()).unwrap();
    assert!(matches!(
        problem_of(tmp.path()),
        WeightsProblem::RemoteCode(_)
    ));
    let tmp = tempfile::tempdir().unwrap();
    model_dir(tmp.path());
    std::fs::create_dir(tmp.path().join("nested.json")).unwrap();
    assert!(matches!(
        problem_of(tmp.path()),
        WeightsProblem::Unexpected(_)
    ));
    let tmp = tempfile::tempdir().unwrap();
    model_dir(tmp.path());
    std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("vocab.txt")).unwrap();
    assert!(matches!(
        problem_of(tmp.path()),
        WeightsProblem::Unexpected(_)
    ));
}

#[test]
fn a_directory_without_its_parts_is_invalid() {
    for (gone, what) in [
        ("config.json", "config.json"),
        ("tokenizer.json", "tokenizer"),
        ("model.safetensors", "safetensors"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        model_dir(tmp.path());
        std::fs::remove_file(tmp.path().join(gone)).unwrap();
        let p = problem_of(tmp.path());
        assert!(
            matches!(p, WeightsProblem::Missing(m) if m.contains(what)),
            "{gone}: {p}"
        );
        assert_eq!(p.status(), einsora_core::agent::StatusCode::ModelInvalid);
    }
    let tmp = tempfile::tempdir().unwrap();
    model_dir(tmp.path());
    std::fs::write(tmp.path().join("config.json"), "{not json").unwrap();
    assert!(
        matches!(problem_of(tmp.path()), WeightsProblem::BadJson(ref n) if n.contains("config"))
    );
}

#[test]
fn headers_that_dont_fit_their_files_are_refused() {
    let tensor = |dtype: &str, shape: serde_json::Value, offsets: serde_json::Value| json!({"t": {"dtype": dtype, "shape": shape, "data_offsets": offsets}});
    let two = |a: serde_json::Value, b: serde_json::Value| json!({"a": a, "b": b});
    let f32 =
        |begin: u64, end: u64| json!({"dtype": "F32", "shape": [1], "data_offsets": [begin, end]});
    let header_over = {
        let mut bytes = (u64::MAX).to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        bytes
    };
    let header_past_end = {
        let mut bytes = 100u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        bytes
    };
    let not_json = {
        let mut bytes = 4u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{{{{");
        bytes
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("short", vec![1, 2, 3], "shorter"),
        ("huge header", header_over, "over the format"),
        ("header past the end", header_past_end, "-byte file"),
        ("not JSON", not_json, "JSON object"),
        (
            "unknown dtype",
            safetensors(&tensor("F128", json!([1]), json!([0, 16])), 16),
            "dtype",
        ),
        (
            "shape vs offsets",
            safetensors(&tensor("F32", json!([2, 2]), json!([0, 12])), 12),
            "don't match",
        ),
        (
            "negative dim",
            safetensors(&tensor("F32", json!([-1]), json!([0, 4])), 4),
            "whole numbers",
        ),
        (
            "overflowing shape",
            safetensors(&tensor("F64", json!([u64::MAX, 2]), json!([0, 8])), 8),
            "too large",
        ),
        (
            "offsets past the data",
            safetensors(&tensor("F32", json!([1]), json!([0, 4])), 2),
            "cover",
        ),
        (
            "trailing data",
            safetensors(&tensor("F32", json!([1]), json!([0, 4])), 8),
            "cover",
        ),
        (
            "overlap",
            safetensors(&two(f32(0, 4), f32(2, 6)), 6),
            "overlaps",
        ),
        ("gap", safetensors(&two(f32(0, 4), f32(8, 12)), 12), "gap"),
        (
            "bad metadata",
            safetensors(&json!({"__metadata__": {"n": 1}}), 0),
            "__metadata__",
        ),
        (
            "half a byte",
            safetensors(&tensor("F4", json!([3]), json!([0, 1])), 1),
            "whole bytes",
        ),
        (
            "seventeen dimensions",
            safetensors(&tensor("U8", json!(vec![1; 17]), json!([0, 1])), 1),
            "over 16 dimensions",
        ),
    ];
    for (case, bytes, expected) in cases {
        let tmp = tempfile::tempdir().unwrap();
        model_dir(tmp.path());
        std::fs::write(tmp.path().join("model.safetensors"), &bytes).unwrap();
        let p = problem_of(tmp.path());
        assert!(
            matches!(p, WeightsProblem::BadSafetensors(_)),
            "{case}: {p}"
        );
        assert!(p.to_string().contains(expected), "{case}: {p}");
        assert!(
            p.to_string().contains("model.safetensors"),
            "{case}: names the file: {p}"
        );
    }
}

#[test]
fn limits_bound_files_sizes_and_counts() {
    let tmp = tempfile::tempdir().unwrap();
    model_dir(tmp.path());
    let limits = |f: fn(&mut DirLimits)| {
        let mut l = DirLimits::default();
        f(&mut l);
        validate_dir(tmp.path(), &l).unwrap_err()
    };
    assert!(matches!(
        limits(|l| l.max_files = 3),
        WeightsProblem::TooManyFiles(3)
    ));
    assert!(matches!(
        limits(|l| l.max_total_size = 100),
        WeightsProblem::TooLarge { .. }
    ));
    assert!(matches!(
        limits(|l| l.max_file_size = 10),
        WeightsProblem::TooLarge { .. }
    ));
    assert!(matches!(
        limits(|l| l.max_json_size = 8),
        WeightsProblem::TooLarge { .. }
    ));
    let p = limits(|l| l.max_tensors = 1);
    assert!(p.to_string().contains("over 1 tensors"), "{p}");
}

fn source(s: &str) -> ModelSource {
    ModelSource::parse(s, None).unwrap()
}

/// `prepare_dir` of the model `name` in `models` into `private`.
async fn copy_in(
    models: &tempfile::TempDir,
    private: &tempfile::TempDir,
    name: &str,
    limits: &DirLimits,
) -> Result<PreparedWeights, ModelProblem> {
    prepare_dir(&source(name), Some(models.path()), private.path(), limits).await
}

#[tokio::test]
async fn a_directory_is_copied_checked_and_reused() {
    let models = tempfile::tempdir().unwrap();
    model_dir(&models.path().join("tiny"));
    let private = tempfile::tempdir().unwrap();
    let limits = DirLimits::default();
    let first = copy_in(&models, &private, "tiny", &limits).await.unwrap();
    assert!(!first.reused);
    assert_eq!(first.path, private.path().join(MODEL_DIR));
    assert_eq!(
        std::fs::read(first.path.join("model.safetensors")).unwrap(),
        good_weights(),
        "a copy, byte for byte"
    );
    let again = copy_in(&models, &private, "file:tiny", &limits)
        .await
        .unwrap();
    assert!(again.reused, "the same files: nothing copied");
    assert_eq!(again.sha256, first.sha256);
    // The original changes: copied again, and checked again.
    std::fs::write(models.path().join("tiny/model.pt"), b"pickle").unwrap();
    let p = copy_in(&models, &private, "tiny", &limits).await;
    assert!(
        matches!(p, Err(ModelProblem::Weights(WeightsProblem::Pickled(_)))),
        "{p:?}"
    );
}

/// A FIFO or a device is refused without being opened, and sizes are checked before anything
/// is copied.
#[tokio::test]
async fn strange_files_and_oversized_ones_are_refused_before_copying() {
    let models = tempfile::tempdir().unwrap();
    model_dir(&models.path().join("tiny"));
    let fifo = models.path().join("tiny/vocab.txt");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let private = tempfile::tempdir().unwrap();
    let limits = DirLimits::default();
    let p = copy_in(&models, &private, "tiny", &limits).await;
    assert!(
        matches!(p, Err(ModelProblem::Weights(WeightsProblem::Unexpected(ref n))) if n.contains("vocab")),
        "{p:?}"
    );
    std::fs::remove_file(&fifo).unwrap();
    let small = DirLimits {
        max_json_size: 8,
        ..DirLimits::default()
    };
    let p = copy_in(&models, &private, "tiny", &small).await;
    assert!(
        matches!(
            p,
            Err(ModelProblem::Weights(WeightsProblem::TooLarge {
                what: "a JSON file",
                ..
            }))
        ),
        "{p:?}"
    );
    let left: Vec<_> = std::fs::read_dir(private.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing copied: {left:?}");
}

#[tokio::test]
async fn only_directories_inside_the_models_directory_are_taken() {
    let models = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    model_dir(&elsewhere.path().join("secret"));
    model_dir(&models.path().join("tiny"));
    std::os::unix::fs::symlink(elsewhere.path().join("secret"), models.path().join("link"))
        .unwrap();
    // A link inside a model directory, to a file outside it.
    std::os::unix::fs::symlink(
        elsewhere.path().join("secret/config.json"),
        models.path().join("tiny/generation_config.json"),
    )
    .unwrap();
    let private = tempfile::tempdir().unwrap();
    let limits = DirLimits::default();
    let prepare = |s: &'static str| {
        let (m, p, l) = (
            models.path().to_owned(),
            private.path().to_owned(),
            limits.clone(),
        );
        async move { prepare_dir(&source(s), Some(&m), &p, &l).await.unwrap_err() }
    };
    assert_eq!(prepare("link").await, ModelProblem::OutsideModelsDir);
    assert_eq!(prepare("../secret").await, ModelProblem::OutsideModelsDir);
    assert_eq!(prepare("missing").await, ModelProblem::NotFound);
    let linked = prepare("tiny").await;
    assert!(
        matches!(linked, ModelProblem::Weights(WeightsProblem::Unexpected(ref n)) if n.contains("generation_config")),
        "{linked:?}"
    );
    std::fs::write(models.path().join("one.gguf"), b"GGUF").unwrap();
    assert_eq!(
        prepare("one.gguf").await,
        ModelProblem::Weights(WeightsProblem::NotADirectory)
    );
    let url = copy_in(&models, &private, "https://models.example/tiny", &limits)
        .await
        .unwrap_err();
    assert!(matches!(url, ModelProblem::BadSource(_)), "{url:?}");
    assert!(
        !private.path().join(MODEL_DIR).exists(),
        "nothing refused was kept"
    );
}
