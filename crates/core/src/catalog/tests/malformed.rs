//! Documents that are not a catalog's shape fail before validation, naming the field.

use super::{CPU, GPU, HEAD, IMAGE, doc, with_classes, with_images};
use crate::catalog::{Catalog, CatalogError};

#[track_caller]
fn expect_malformed(yaml: &str, fragment: &str) {
    match Catalog::from_yaml(yaml) {
        Err(e @ CatalogError::Malformed { .. }) => {
            let message = e.to_string();
            assert!(message.contains(fragment), "{message}");
            assert!(e.problems().is_empty());
        }
        other => panic!("expected a malformed catalog, got {other:?}"),
    }
}

#[test]
fn unknown_top_level_fields_are_rejected() {
    expect_malformed(
        &format!("{}version: 2\n", with_classes(&[])),
        "unknown field `version`",
    );
}

#[test]
fn unknown_class_fields_are_rejected() {
    let yaml = with_classes(&["{name: big, accelerator: cpu, cpus: 1, memory_gib: 2, gpus: 1}"]);
    expect_malformed(&yaml, "unknown field `gpus`");
}

#[test]
fn unknown_image_runtime_and_driver_ref_fields_are_rejected() {
    let cases = [
        (
            "{name: x, kinds: [vm], runtimes: [{name: r, accelerators: [cpu]}], tag: latest}",
            "`tag`",
        ),
        (
            "{name: x, kinds: [vm], runtimes: [{name: r, accelerators: [cpu], version: 1}]}",
            "`version`",
        ),
        (
            "{name: x, kinds: [notebook], runtimes: [{name: r, accelerators: [cpu]}], driver_refs: [{driver: sim, accelerators: [cpu], isolation: strong}]}",
            "`isolation`",
        ),
    ];
    for (image, field) in cases {
        expect_malformed(&with_images(&[image]), &format!("unknown field {field}"));
    }
}

#[test]
fn missing_and_mistyped_fields_are_malformed() {
    expect_malformed(
        &doc(HEAD, &["{name: c, accelerator: cpu, cpus: 1}"], &[IMAGE]),
        "memory_gib",
    );
    expect_malformed(
        &doc(
            HEAD,
            &["{name: c, accelerator: cpu, cpus: -1, memory_gib: 2}"],
            &[IMAGE],
        ),
        "cpus",
    );
    expect_malformed("classes: []\nimages: []\n", "regions");
    expect_malformed("- just\n- a list\n", "");
    expect_malformed("regions: [local\n", "");
}

#[test]
fn regions_with_no_value_do_not_mean_everywhere() {
    let yaml =
        doc(HEAD, &[GPU, CPU], &[IMAGE]).replace("memory_gib: 2}", "memory_gib: 2, regions: ~}");
    expect_malformed(&yaml, "regions");
}
