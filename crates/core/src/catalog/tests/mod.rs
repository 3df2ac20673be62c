//! Catalog tests: the built-in file, malformed documents, and one test per validation problem.
//! Validation tests start from a small valid document and add one bad entry.

mod builtin;
mod catalog;
mod classes;
mod images;
mod malformed;

use super::{Catalog, CatalogError, Problem};

const HEAD: &str = "regions: [local, eu-west]\ndrivers: [sim, docker, macos-native]\n";
const GPU: &str = "{name: l40s-48gb, accelerator: nvidia, devices: 1, cpus: 8, memory_gib: 64, models: [NVIDIA L40S]}";
const CPU: &str = "{name: cpu-1c-2g, accelerator: cpu, cpus: 1, memory_gib: 2}";
const APPLE: &str = "{name: apple-silicon-32gb, accelerator: apple, devices: 1, cpus: 8, memory_gib: 24, unified_memory_gib: 32}";
const IMAGE: &str = "{name: openai-endpoint, kinds: [endpoint], runtimes: [{name: vllm, accelerators: [nvidia]}, {name: llama.cpp, accelerators: [nvidia, apple, cpu]}], driver_refs: [{driver: docker, accelerators: [nvidia, cpu]}]}";

fn doc(head: &str, classes: &[&str], images: &[&str]) -> String {
    let items = |list: &[&str]| -> String { list.iter().map(|i| format!("  - {i}\n")).collect() };
    format!(
        "{head}classes:\n{}images:\n{}",
        items(classes),
        items(images)
    )
}

/// The small valid document plus `extra` classes.
fn with_classes(extra: &[&str]) -> String {
    let classes: Vec<&str> = [GPU, CPU, APPLE]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    doc(HEAD, &classes, &[IMAGE])
}

/// The small valid document plus `extra` images.
fn with_images(extra: &[&str]) -> String {
    let images: Vec<&str> = [IMAGE].into_iter().chain(extra.iter().copied()).collect();
    doc(HEAD, &[GPU, CPU, APPLE], &images)
}

fn problems(yaml: &str) -> (String, Vec<Problem>) {
    match Catalog::from_yaml(yaml) {
        Err(e @ CatalogError::Invalid { .. }) => (e.to_string(), e.problems().to_vec()),
        other => panic!("expected an invalid catalog, got {other:?}\n{yaml}"),
    }
}

/// The document has exactly one problem, on `entry`, and the error message names both.
#[track_caller]
fn expect_problem(yaml: &str, entry: &str, fragment: &str) {
    let (message, problems) = problems(yaml);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].entry, entry, "{problems:#?}");
    assert!(problems[0].problem.contains(fragment), "{problems:#?}");
    assert!(
        message.contains(entry) && message.contains(fragment),
        "{message}"
    );
}

#[test]
fn the_test_documents_are_valid() {
    let catalog = Catalog::from_yaml(&with_classes(&[])).unwrap();
    assert_eq!(catalog.classes().len(), 3);
    assert_eq!(catalog.images().len(), 1);
    assert_eq!(catalog.drivers().len(), 3);
}
