//! Catalog-wide problems (regions, drivers, empty sections), several problems at once, regional
//! classes, and loading from a file.

use super::{APPLE, CPU, GPU, IMAGE, doc, expect_problem, problems, with_classes};
use crate::catalog::{Catalog, CatalogError};
use crate::region::Region;

const DRIVERS: &str = "drivers: [sim, docker, macos-native]\n";

fn with_head(head: &str) -> String {
    doc(head, &[GPU, CPU, APPLE], &[IMAGE])
}

#[test]
fn a_catalog_needs_a_region() {
    expect_problem(
        &with_head(&format!("regions: []\n{DRIVERS}")),
        "regions",
        "lists no regions",
    );
}

#[test]
fn bad_region_names_are_refused() {
    let yaml = with_head(&format!("regions: [local, EU_West]\n{DRIVERS}"));
    expect_problem(&yaml, "region \"EU_West\"", "lowercase letters");
}

#[test]
fn duplicate_regions_are_refused() {
    let yaml = with_head(&format!("regions: [local, eu-west, local]\n{DRIVERS}"));
    expect_problem(&yaml, "region \"local\"", "more than once");
}

#[test]
fn the_first_region_is_the_default() {
    let catalog =
        Catalog::from_yaml(&with_head(&format!("regions: [eu-west, local]\n{DRIVERS}"))).unwrap();
    assert_eq!(catalog.default_region().as_str(), "eu-west");
}

#[test]
fn unknown_drivers_are_refused() {
    let yaml = with_head("regions: [local]\ndrivers: [sim, docker, macos-native, hyperv]\n");
    expect_problem(&yaml, "driver \"hyperv\"", "not a driver Einsora has");
}

#[test]
fn duplicate_drivers_are_refused() {
    let yaml = with_head("regions: [local]\ndrivers: [sim, docker, macos-native, sim]\n");
    expect_problem(&yaml, "driver \"sim\"", "more than once");
}

#[test]
fn a_catalog_needs_classes_and_images() {
    let yaml = format!("{}classes: []\nimages:\n  - {IMAGE}\n", super::HEAD);
    expect_problem(&yaml, "classes", "no compute classes");
    let yaml = format!("{}classes:\n  - {GPU}\nimages: []\n", super::HEAD);
    expect_problem(&yaml, "images", "no images");
}

#[test]
fn every_problem_is_named_in_one_error() {
    let yaml = doc(
        "regions: [local, Bad]\ndrivers: [sim, nope]\n",
        &[
            GPU,
            "{name: cpu-x, accelerator: cpu, devices: 2, cpus: 1, memory_gib: 1}",
        ],
        &[
            IMAGE,
            "{name: notebook, kinds: [notebook], runtimes: [{name: cpu, accelerators: [tpu]}]}",
        ],
    );
    let (message, problems) = problems(&yaml);
    for entry in [
        "region \"Bad\"",
        "driver \"nope\"",
        "class \"cpu-x\"",
        "image \"openai-endpoint\"",
        "image \"notebook\"",
    ] {
        assert!(
            problems.iter().any(|p| p.entry == entry),
            "{entry}: {problems:#?}"
        );
        assert!(message.contains(entry), "{entry}: {message}");
    }
    // openai-endpoint refers to docker, which this catalog doesn't enable.
    assert_eq!(problems.len(), 5, "{problems:#?}");
}

#[test]
fn a_regional_class_is_offered_only_there() {
    let regional = "{name: h100-80gb, accelerator: nvidia, devices: 1, cpus: 16, memory_gib: 128, models: [NVIDIA H100 80GB HBM3], regions: [eu-west]}";
    let catalog = Catalog::from_yaml(&with_classes(&[regional])).unwrap();
    let local = Region::new("local").unwrap();
    let eu = Region::new("eu-west").unwrap();
    let h100 = catalog.class("h100-80gb").unwrap();
    assert!(h100.offered_in(&eu) && !h100.offered_in(&local));
    assert_eq!(h100.regions(), Some(&[eu.clone()][..]));
    let names = |r| catalog.classes_in(r).map(|c| c.name()).collect::<Vec<_>>();
    assert!(!names(&local).contains(&"h100-80gb"));
    assert!(names(&eu).contains(&"h100-80gb") && names(&eu).contains(&"cpu-1c-2g"));
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "einsora-catalog-{}-{name}.yaml",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn load_reads_a_file_and_names_it_in_errors() {
    let good = temp_file("good", &with_classes(&[]));
    assert_eq!(
        Catalog::load(&good).unwrap(),
        Catalog::from_yaml(&with_classes(&[])).unwrap()
    );

    let bad = temp_file(
        "bad",
        &with_classes(&["{name: cpu-1c-2g, accelerator: cpu, cpus: 1, memory_gib: 2}"]),
    );
    let message = Catalog::load(&bad).unwrap_err().to_string();
    assert!(
        message.contains(&bad.display().to_string()) && message.contains("class \"cpu-1c-2g\""),
        "{message}"
    );

    let malformed = temp_file("malformed", "regions: [local]\n");
    let error = Catalog::load(&malformed).unwrap_err();
    assert!(matches!(error, CatalogError::Malformed { .. }), "{error:?}");
    assert!(
        error.to_string().contains(&malformed.display().to_string()),
        "{error}"
    );

    for path in [&good, &bad, &malformed] {
        std::fs::remove_file(path).unwrap();
    }
    let error = Catalog::load(&good).unwrap_err();
    assert!(matches!(error, CatalogError::Read { .. }), "{error:?}");
    assert!(
        error.to_string().contains(&good.display().to_string()),
        "{error}"
    );
}
