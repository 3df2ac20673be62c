//! Compiles every .proto under `proto/` with pure-Rust protox (no system protoc), generates
//! prost messages and tonic clients and servers, and writes the encoded descriptor set (with
//! extension options such as google.api.http kept) for `FILE_DESCRIPTOR_SET`.

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};

/// The file `FILE_DESCRIPTOR_SET` includes from OUT_DIR.
const DESCRIPTOR_FILE: &str = "einsora_descriptor.bin";

// Cargo hands a build script its directories in the environment: not settings.
#[allow(clippy::disallowed_methods)]
fn main() -> Result<(), Box<dyn Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);

    let mut files = Vec::new();
    collect_protos(&root, &mut files)?;
    files.sort();

    // tonic-prost-build does not emit these itself. The directory catches added files.
    println!("cargo:rerun-if-changed={}", root.display());
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }

    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true).include_source_info(true);
    for file in &files {
        compiler.open_file(file.strip_prefix(&root)?)?;
    }

    // The prost_types form drops extension options; this encoding keeps them.
    fs::write(
        out_dir.join(DESCRIPTOR_FILE),
        compiler.encode_file_descriptor_set(),
    )?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .codec_path("crate::codec::LeanCodec")
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}

/// Every `.proto` file under `dir`, recursively.
fn collect_protos(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), Box<dyn Error>> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_protos(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            files.push(path);
        }
    }
    Ok(())
}
