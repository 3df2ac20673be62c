//! The validator: what it accepts, and each refusal with its own problem.

use std::io::Write;

use super::*;
use crate::models::gguf::{GgufProblem, GgufSummary, Section, validate};
use crate::models::{Limits, ModelProblem};

fn check_with(bytes: &[u8], limits: &Limits) -> Result<GgufSummary, GgufProblem> {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(bytes).unwrap();
    validate(file, limits)
}

fn check(bytes: &[u8]) -> Result<GgufSummary, GgufProblem> {
    check_with(bytes, &Limits::default())
}

fn refused(g: &Gguf) -> GgufProblem {
    check(&g.bytes()).expect_err("should be refused")
}

#[test]
fn a_valid_file_is_summarised() {
    let g = Gguf::valid();
    let bytes = g.bytes();
    let summary = check(&bytes).unwrap();
    assert_eq!(
        summary,
        GgufSummary {
            version: 3,
            tensor_count: 3,
            metadata_count: 8,
            architecture: Some("llama".into()),
            alignment: 32,
            data_offset: g.layout().data as u64,
            file_size: bytes.len() as u64,
        }
    );
    let v2 = Gguf {
        version: 2,
        ..Gguf::valid()
    };
    assert_eq!(check(&v2.bytes()).unwrap().version, 2);
}

#[test]
fn its_own_alignment_is_honoured() {
    let g = Gguf {
        alignment: 64,
        ..Gguf::valid()
    }
    .kv("general.alignment", U32, 64u32.to_le_bytes().to_vec());
    let summary = check(&g.bytes()).unwrap();
    assert_eq!(summary.alignment, 64);
    assert_eq!(summary.data_offset % 64, 0);
    // Padded to 32 while saying 64: the offsets are off.
    let wrong = Gguf::valid().kv("general.alignment", U32, 64u32.to_le_bytes().to_vec());
    assert!(matches!(
        refused(&wrong),
        GgufProblem::MisalignedTensor { .. } | GgufProblem::TensorOutOfPlace { .. }
    ));
}

#[test]
fn no_architecture_is_fine() {
    let mut g = Gguf::valid();
    g.kv.remove(0);
    assert_eq!(check(&g.bytes()).unwrap().architecture, None);
}

#[test]
fn truncated_files_say_where() {
    let g = Gguf::valid();
    let bytes = g.bytes();
    let at = g.layout();
    let cut = |n: usize| check(&bytes[..n]).unwrap_err();
    assert_eq!(cut(0), GgufProblem::Truncated(Section::Header));
    assert_eq!(cut(2), GgufProblem::Truncated(Section::Header));
    assert_eq!(cut(at.kv - 3), GgufProblem::Truncated(Section::Header));
    assert_eq!(cut(at.kv + 5), GgufProblem::Truncated(Section::Metadata));
    assert_eq!(
        cut(at.tensor_infos - 1),
        GgufProblem::Truncated(Section::Metadata)
    );
    assert_eq!(
        cut(at.tensor_infos + 5),
        GgufProblem::Truncated(Section::TensorInfo)
    );
    assert_eq!(
        cut(at.infos_end - 1),
        GgufProblem::Truncated(Section::TensorInfo)
    );
    assert_ne!(at.infos_end, at.data, "the fixture needs padding here");
    assert_eq!(
        cut(at.infos_end),
        GgufProblem::Truncated(Section::TensorData)
    );
    // Inside the first tensor, and inside the last.
    let first = GgufProblem::TensorOutOfBounds {
        name: "\"token_embd.weight\"".into(),
    };
    assert_eq!(cut(at.data), first);
    assert_eq!(cut(at.data + 10), first);
    assert_eq!(
        cut(bytes.len() - 40),
        GgufProblem::TensorOutOfBounds {
            name: "\"blk.0.ffn_up.weight\"".into()
        }
    );
}

#[test]
fn magic_and_version_are_checked() {
    let g = Gguf {
        magic: *b"GGUG",
        ..Gguf::valid()
    };
    assert_eq!(refused(&g), GgufProblem::BadMagic);
    assert_eq!(
        check(b"\x7fELF\x02\x01\x01\0").unwrap_err(),
        GgufProblem::BadMagic
    );
    for version in [0, 1, 4, 3u32.swap_bytes()] {
        let g = Gguf {
            version,
            ..Gguf::valid()
        };
        assert_eq!(refused(&g), GgufProblem::UnsupportedVersion(version));
    }
}

#[test]
fn tensor_offsets_must_be_aligned_in_place_and_inside() {
    let with_offset = |i: usize, offset: u64| {
        let mut g = Gguf::valid();
        g.tensors[i].offset = Some(offset);
        refused(&g)
    };
    assert_eq!(
        with_offset(1, 65),
        GgufProblem::MisalignedTensor {
            name: "\"blk.0.attn_norm.weight\"".into(),
            offset: 65,
            alignment: 32
        }
    );
    let last = || GgufProblem::TensorOutOfBounds {
        name: "\"blk.0.ffn_up.weight\"".into(),
    };
    assert_eq!(with_offset(2, 1 << 40), last());
    assert_eq!(with_offset(2, !31u64), last());
    // Overlapping the tensor before it, or leaving a gap.
    assert_eq!(
        with_offset(1, 0),
        GgufProblem::TensorOutOfPlace {
            name: "\"blk.0.attn_norm.weight\"".into(),
            offset: 0,
            expected: 64
        }
    );
    let mut g = Gguf::valid();
    g.tensors[0].offset = Some(32);
    assert!(matches!(refused(&g), GgufProblem::TensorOutOfPlace { .. }));
}

#[test]
fn absurd_counts_are_refused() {
    let g = Gguf {
        n_tensors: Some(1 << 60),
        ..Gguf::valid()
    };
    assert_eq!(
        refused(&g),
        GgufProblem::TooManyTensors {
            count: 1 << 60,
            limit: 65_536
        }
    );
    let g = Gguf {
        n_kv: Some(1 << 60),
        ..Gguf::valid()
    };
    assert!(matches!(refused(&g), GgufProblem::TooManyMetadata { count, .. } if count == 1 << 60));
    let g = Gguf {
        tensors: vec![],
        ..Gguf::valid()
    };
    assert_eq!(refused(&g), GgufProblem::NoTensors);
    // More declared than written.
    let g = Gguf {
        n_kv: Some(9),
        ..Gguf::valid()
    };
    assert!(check(&g.bytes()).is_err());
}

#[test]
fn absurd_lengths_are_refused() {
    let huge = 1u64 << 60;
    let string_err = |section| GgufProblem::StringTooLong {
        section,
        len: huge,
        limit: match section {
            Section::Metadata => 16 << 20,
            _ => 63,
        },
    };
    // A key's length.
    let mut bytes = Gguf::valid().bytes();
    let at = Gguf::valid().layout().kv;
    bytes[at..at + 8].copy_from_slice(&huge.to_le_bytes());
    assert_eq!(
        check(&bytes).unwrap_err(),
        GgufProblem::StringTooLong {
            section: Section::Metadata,
            len: huge,
            limit: 64 << 10
        }
    );
    // A string value's length.
    let g = Gguf::valid().kv("x.s", STRING, huge.to_le_bytes().to_vec());
    assert_eq!(refused(&g), string_err(Section::Metadata));
    // A string in an array.
    let mut arr = array_head(STRING, 1);
    arr.extend(huge.to_le_bytes());
    assert_eq!(
        refused(&Gguf::valid().kv("x.a", ARRAY, arr)),
        string_err(Section::Metadata)
    );
    // An array's length.
    let g = Gguf::valid().kv("x.a", ARRAY, array_head(U32, huge as usize));
    assert_eq!(
        refused(&g),
        GgufProblem::ArrayTooLong {
            key: "\"x.a\"".into(),
            len: huge,
            limit: 1 << 24
        }
    );
    // A tensor name's length.
    let mut g = Gguf::valid();
    g.tensors[0].name = vec![b'a'; 64];
    assert!(matches!(
        refused(&g),
        GgufProblem::StringTooLong {
            section: Section::TensorInfo,
            len: 64,
            limit: 63
        }
    ));
    let mut bytes = Gguf::valid().bytes();
    let at = Gguf::valid().layout().tensor_infos;
    bytes[at..at + 8].copy_from_slice(&huge.to_le_bytes());
    assert_eq!(check(&bytes).unwrap_err(), string_err(Section::TensorInfo));
}

#[test]
fn metadata_and_file_size_limits_hold() {
    let limits = Limits {
        max_metadata_bytes: 1024,
        ..Limits::default()
    };
    let mut arr = array_head(U64, 200);
    arr.extend(std::iter::repeat_n(0u8, 200 * 8));
    let g = Gguf::valid().kv("x.big", ARRAY, arr);
    assert_eq!(
        check_with(&g.bytes(), &limits).unwrap_err(),
        GgufProblem::MetadataTooLarge { limit: 1024 }
    );
    let bytes = Gguf::valid().bytes();
    let limits = Limits {
        max_file_size: bytes.len() as u64 - 1,
        ..Limits::default()
    };
    let problem = check_with(&bytes, &limits).unwrap_err();
    assert!(matches!(problem, GgufProblem::FileTooLarge { .. }));
    assert!(matches!(
        ModelProblem::from(problem),
        ModelProblem::TooLarge { .. }
    ));
}

#[test]
fn tensor_shapes_and_types_are_checked() {
    let with = |f: &dyn Fn(&mut Tensor)| {
        let mut g = Gguf::valid();
        f(&mut g.tensors[0]);
        refused(&g)
    };
    let name = || "\"token_embd.weight\"".to_string();
    for bad in [4, 5, 31, 99, u32::MAX] {
        assert_eq!(
            with(&|t| t.ggml_type = bad),
            GgufProblem::UnknownType {
                name: name(),
                type_id: bad
            }
        );
    }
    assert_eq!(
        with(&|t| t.dims = vec![]),
        GgufProblem::BadDimensionCount {
            name: name(),
            n_dims: 0
        }
    );
    assert_eq!(
        with(&|t| t.dims = vec![1; 5]),
        GgufProblem::BadDimensionCount {
            name: name(),
            n_dims: 5
        }
    );
    assert_eq!(
        with(&|t| t.dims = vec![8, 0]),
        GgufProblem::ZeroDimension { name: name() }
    );
    assert_eq!(
        with(&|t| t.dims = vec![1 << 40, 1 << 40]),
        GgufProblem::TooManyElements { name: name() }
    );
    // Elements fit an i64; bytes don't fit a u64.
    assert_eq!(
        with(&|t| t.dims = vec![1 << 62]),
        GgufProblem::TooManyElements { name: name() }
    );
    assert_eq!(
        with(&|t| {
            t.ggml_type = Q8_0;
            t.dims = vec![48, 2];
        }),
        GgufProblem::PartialBlock {
            name: name(),
            type_name: "Q8_0"
        }
    );
}

#[test]
fn tensor_names_cant_be_paths() {
    let named = |name: &[u8]| {
        let mut g = Gguf::valid();
        g.tensors[1].name = name.to_vec();
        refused(&g)
    };
    for (name, why) in [
        (&b"../x"[..], "contains a path separator"),
        (b"..", "contains '..'"),
        (b"a..b", "contains '..'"),
        (b"/etc/passwd", "contains a path separator"),
        (b"a\\b", "contains a path separator"),
        (b"a\0b", "contains a NUL byte"),
        (b"a\nb", "contains control characters"),
        (b"a\x1bb", "contains control characters"),
        (b"a\x7f", "contains control characters"),
        (b"", "is empty"),
        (b"\xff\xfe", "isn't UTF-8"),
    ] {
        match named(name) {
            GgufProblem::BadTensorName {
                index: 1, why: got, ..
            } => {
                assert_eq!(got, why, "{name:?}")
            }
            other => panic!("{name:?}: {other:?}"),
        }
    }
    // Shown escaped: a name can't break a log line.
    assert!(!named(b"a\nb").to_string().contains('\n'));
    let mut g = Gguf::valid();
    g.tensors[2].name = g.tensors[0].name.clone();
    assert_eq!(
        refused(&g),
        GgufProblem::DuplicateTensor {
            name: "\"token_embd.weight\"".into()
        }
    );
}

#[test]
fn metadata_types_and_keys_are_checked() {
    let g = Gguf::valid().kv("x.t", 13, vec![]);
    assert_eq!(
        refused(&g),
        GgufProblem::BadValueType {
            key: "\"x.t\"".into(),
            type_id: 13
        }
    );
    let g = Gguf::valid().kv("x.t", ARRAY, array_head(42, 0));
    assert!(matches!(
        refused(&g),
        GgufProblem::BadValueType { type_id: 42, .. }
    ));
    let mut nested = array_head(ARRAY, 1);
    nested.extend(array_head(U32, 0));
    let g = Gguf::valid().kv("x.n", ARRAY, nested);
    assert_eq!(
        refused(&g),
        GgufProblem::NestedArray {
            key: "\"x.n\"".into()
        }
    );
    let g = Gguf::valid().kv("general.name", STRING, string(b"again"));
    assert_eq!(
        refused(&g),
        GgufProblem::DuplicateKey {
            key: "\"general.name\"".into()
        }
    );
    for key in ["", "a\0b", "a\tb"] {
        let g = Gguf::valid().kv(key, U32, vec![0; 4]);
        assert!(matches!(refused(&g), GgufProblem::BadKey { .. }), "{key:?}");
    }
    for (value_type, value) in [
        (U32, 48u32.to_le_bytes().to_vec()),
        (U32, 0u32.to_le_bytes().to_vec()),
        (U64, 32u64.to_le_bytes().to_vec()),
    ] {
        let g = Gguf::valid().kv("general.alignment", value_type, value);
        assert_eq!(refused(&g), GgufProblem::BadAlignment);
    }
    let mut g = Gguf::valid();
    g.kv[0].2 = string(b"ll\nama");
    assert_eq!(refused(&g), GgufProblem::BadArchitecture);
    g.kv[0] = (b"general.architecture".to_vec(), U32, vec![0; 4]);
    assert_eq!(refused(&g), GgufProblem::BadArchitecture);
}

/// Made by gguf-py 0.19 (the writer images/make-model.py uses), with the same metadata and
/// tensors as `Gguf::valid()`:
///
/// ```python
/// w = gguf.GGUFWriter(out, "llama")
/// w.add_name("tiny"); w.add_context_length(2048); w.add_layer_norm_rms_eps(1e-5)
/// toks = ["<unk>", "<s>", "</s>", "\u2581the", "a"]
/// w.add_token_list(toks); w.add_token_scores([-float(i) for i in range(5)])
/// w.add_token_types(list(range(5))); w.add_chat_template("{{ messages }}")
/// w.add_tensor("token_embd.weight", np.arange(16, dtype=np.float32).reshape(2, 8))
/// w.add_tensor("blk.0.attn_norm.weight", np.ones(16, np.float16))
/// q = gguf.quants.quantize(np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64),
///                          gguf.GGMLQuantizationType.Q8_0)
/// w.add_tensor("blk.0.ffn_up.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
/// w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
/// ```
const GGUF_PY_TINY: &[u8] = include_bytes!("../testdata/gguf-py-tiny.gguf");

#[test]
fn what_gguf_py_writes_is_accepted_and_laid_out_like_ours() {
    let summary = check(GGUF_PY_TINY).unwrap();
    assert_eq!(summary.version, 3);
    assert_eq!(summary.tensor_count, 3);
    assert_eq!(summary.metadata_count, 8);
    assert_eq!(summary.architecture.as_deref(), Some("llama"));
    assert_eq!(summary.file_size, GGUF_PY_TINY.len() as u64);
    // Byte for byte up to the tensor data: our writer is a faithful fixture.
    let ours = Gguf::valid().bytes();
    let data = Gguf::valid().layout().data;
    assert_eq!(summary.data_offset, data as u64);
    assert_eq!(&GGUF_PY_TINY[..data], &ours[..data]);
    assert_eq!(GGUF_PY_TINY.len(), ours.len());
}

/// The real model images/make-model.py made, which the test command names in
/// EINSORA_TEST_MODEL (as the end-to-end tests use it). Outside the test command (a bare
/// `cargo test`) there may be none; under CI its absence is a failure, not a skip.
#[test]
#[allow(clippy::disallowed_methods)] // the test command's own environment
fn the_e2e_model_is_accepted() {
    let Some(path) = std::env::var_os("EINSORA_TEST_MODEL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "EINSORA_TEST_MODEL must name the model ./scripts/test builds"
        );
        eprintln!("skipped: EINSORA_TEST_MODEL names no model made by images/make-model.py");
        return;
    };
    let summary = crate::models::gguf::validate_path(path.as_ref(), &Limits::default()).unwrap();
    assert_eq!(summary.architecture.as_deref(), Some("llama"));
    assert!(summary.tensor_count > 0);
}

/// The tensor data is never read: a 4 GiB sparse file validates at once.
#[test]
fn tensor_data_is_not_read() {
    // The table of a 4 GiB tensor, without its data.
    let head = Gguf {
        tensors: vec![Tensor {
            len: 0,
            ..Tensor::new("big.weight", &[1 << 30], F32)
        }],
        ..Gguf::valid()
    };
    let data = head.layout().data as u64;
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&head.bytes()).unwrap();
    file.set_len(data + (4 << 30)).unwrap();
    let started = std::time::Instant::now();
    let summary = validate(file, &Limits::default()).unwrap();
    assert_eq!(summary.file_size, data + (4 << 30));
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}
