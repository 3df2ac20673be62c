//! One test per image problem; each checks the problem names the image.

use super::{expect_problem, with_images};
use crate::accelerator::AcceleratorKind::{Cpu, Nvidia};
use crate::catalog::Catalog;
use crate::kind::WorkloadKind::Notebook;

const NAME: &str = "image \"notebook\"";

/// A notebook image with the given runtimes and extra fields.
fn notebook(runtimes: &str, rest: &str) -> String {
    format!("{{name: notebook, kinds: [notebook], runtimes: [{runtimes}]{rest}}}")
}

const CPU_RUNTIME: &str = "{name: jupyterlab-cpu, accelerators: [cpu]}";

#[test]
fn duplicate_image_names_are_refused() {
    let yaml = with_images(&[
        "{name: openai-endpoint, kinds: [endpoint], runtimes: [{name: r, accelerators: [cpu]}]}",
    ]);
    expect_problem(&yaml, "image \"openai-endpoint\"", "more than once");
}

#[test]
fn bad_image_and_runtime_names_are_refused() {
    let yaml = with_images(&[
        "{name: Ubuntu_24, kinds: [vm], runtimes: [{name: r, accelerators: [cpu]}]}",
    ]);
    expect_problem(
        &yaml,
        "image \"Ubuntu_24\"",
        "image name \"Ubuntu_24\" is not valid",
    );
    let yaml = with_images(&[&notebook("{name: -cpu, accelerators: [cpu]}", "")]);
    expect_problem(&yaml, NAME, "runtime name \"-cpu\" is not valid");
}

#[test]
fn kinds_must_be_known_and_present() {
    let yaml = with_images(&[
        "{name: notebook, kinds: [notebook, batch], runtimes: [{name: r, accelerators: [cpu]}]}",
    ]);
    expect_problem(&yaml, NAME, "kind \"batch\" is not one of");
    let yaml =
        with_images(&["{name: notebook, kinds: [], runtimes: [{name: r, accelerators: [cpu]}]}"]);
    expect_problem(&yaml, NAME, "kinds is empty");
    let yaml = with_images(&[
        "{name: notebook, kinds: [notebook, notebook], runtimes: [{name: r, accelerators: [cpu]}]}",
    ]);
    expect_problem(&yaml, NAME, "kinds lists notebook twice");
}

#[test]
fn an_image_needs_runtimes_with_known_accelerators() {
    expect_problem(
        &with_images(&[&notebook("", "")]),
        NAME,
        "lists no runtimes",
    );
    let yaml = with_images(&[&notebook("{name: jupyterlab-tpu, accelerators: [tpu]}", "")]);
    expect_problem(
        &yaml,
        NAME,
        "runtime \"jupyterlab-tpu\" accelerators: accelerator \"tpu\" is not one of",
    );
    let yaml = with_images(&[&notebook("{name: jupyterlab-cpu, accelerators: []}", "")]);
    expect_problem(
        &yaml,
        NAME,
        "runtime \"jupyterlab-cpu\" accelerators is empty",
    );
}

#[test]
fn runtimes_are_unique_and_each_is_reachable() {
    let yaml = with_images(&[&notebook(
        &format!("{CPU_RUNTIME}, {{name: jupyterlab-cpu, accelerators: [nvidia]}}"),
        "",
    )]);
    expect_problem(&yaml, NAME, "lists runtime \"jupyterlab-cpu\" twice");
    let yaml = with_images(&[&notebook(
        &format!("{CPU_RUNTIME}, {{name: other-cpu, accelerators: [cpu]}}"),
        "",
    )]);
    expect_problem(&yaml, NAME, "runtime \"other-cpu\" is never used");
}

#[test]
fn driver_refs_name_enabled_drivers_once() {
    let refs =
        |list: &str| with_images(&[&notebook(CPU_RUNTIME, &format!(", driver_refs: [{list}]"))]);
    expect_problem(
        &refs("{driver: kubevirt, accelerators: [cpu]}"),
        NAME,
        "driver \"kubevirt\", which is not a driver Einsora has",
    );
    expect_problem(
        &refs("{driver: macos-container, accelerators: [cpu]}"),
        NAME,
        "not enabled in the catalog's drivers",
    );
    expect_problem(
        &refs("{driver: sim, accelerators: [cpu]}, {driver: sim, accelerators: [cpu]}"),
        NAME,
        "driver \"sim\" twice",
    );
}

#[test]
fn every_accelerator_a_driver_ref_claims_has_a_runtime() {
    let yaml = with_images(&[&notebook(
        CPU_RUNTIME,
        ", driver_refs: [{driver: docker, accelerators: [cpu, nvidia]}]",
    )]);
    expect_problem(
        &yaml,
        NAME,
        "lets docker run it on nvidia, but it has no runtime for nvidia",
    );
}

#[test]
fn driver_refs_respect_the_driver_table() {
    let apple = "{name: jupyterlab-metal, accelerators: [apple]}";
    let yaml = with_images(&[&notebook(
        apple,
        ", driver_refs: [{driver: docker, accelerators: [apple]}]",
    )]);
    expect_problem(&yaml, NAME, "driver docker does not run on apple");
    let vm = "{name: ubuntu, kinds: [vm], runtimes: [{name: cloud, accelerators: [cpu]}], driver_refs: [{driver: docker, accelerators: [cpu]}]}";
    expect_problem(
        &with_images(&[vm]),
        "image \"ubuntu\"",
        "driver docker runs none of its kinds (vm) on cpu",
    );
}

#[test]
fn an_image_limited_to_classes_names_real_ones_it_can_run() {
    let limited =
        |classes: &str| with_images(&[&notebook(CPU_RUNTIME, &format!(", classes: [{classes}]"))]);
    expect_problem(
        &limited("cpu-64c-1t"),
        NAME,
        "class \"cpu-64c-1t\", which is not in the catalog's classes",
    );
    expect_problem(
        &limited("l40s-48gb"),
        NAME,
        "class \"l40s-48gb\", but has no runtime for its accelerator (nvidia)",
    );
    expect_problem(&limited(""), NAME, "empty classes list");
    expect_problem(
        &limited("cpu-1c-2g, cpu-1c-2g"),
        NAME,
        "class \"cpu-1c-2g\" twice",
    );
}

#[test]
fn runs_on_follows_runtimes_and_class_limits() {
    let cuda = "{name: jupyterlab-cuda, accelerators: [nvidia]}";
    let image = notebook(
        &format!("{cuda}, {CPU_RUNTIME}"),
        ", classes: [cpu-1c-2g], driver_refs: [{driver: docker, accelerators: [nvidia, cpu]}]",
    );
    let catalog = Catalog::from_yaml(&with_images(&[&image])).unwrap();
    let notebook = catalog.image("notebook").unwrap();
    assert_eq!(notebook.classes(), Some(&["cpu-1c-2g".to_owned()][..]));
    assert!(notebook.runs_on(catalog.class("cpu-1c-2g").unwrap()));
    // Has a CUDA runtime, but is limited to the CPU class.
    assert!(!notebook.runs_on(catalog.class("l40s-48gb").unwrap()));
    assert!(!notebook.runs_on(catalog.class("apple-silicon-32gb").unwrap()));
    assert_eq!(
        notebook
            .drivers_for(Notebook, Cpu)
            .map(|d| d.name)
            .collect::<Vec<_>>(),
        ["docker"]
    );
    assert_eq!(
        notebook.runtime_for(Nvidia).map(|r| r.name()),
        Some("jupyterlab-cuda")
    );
    let refs = notebook.driver_refs();
    assert_eq!(
        (refs.len(), refs[0].driver().name, refs[0].accelerators()),
        (1, "docker", &[Nvidia, Cpu][..])
    );
}
