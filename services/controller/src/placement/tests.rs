use std::collections::BTreeMap;
use std::time::Duration;

use einsora_core::attempt::Attempt;
use einsora_core::catalog::Catalog;
use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::{CatalogEntry, Reason};
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use time::OffsetDateTime;

use super::*;

/// A pending workload in `local`, of a new tenant.
pub(super) fn workload(kind: WorkloadKind, class: &str, units: u32, image: &str) -> Workload {
    let now = OffsetDateTime::now_utc();
    Workload {
        owner: None,
        id: WorkloadId::new(),
        tenant_id: TenantId::new(),
        kind,
        name: "w".into(),
        gpu_class: class.into(),
        placed_class: None,
        units,
        image: image.into(),
        region: Region::new("local").unwrap(),
        machine_id: None,
        driver: None,
        devices: Vec::new(),
        attempt: Attempt::NONE,
        fallback: vec![],
        fallback_after_s: None,
        params: "{}".into(),
        state: State::Pending,
        reason: String::new(),
        version: 1,
        created_at: now,
        updated_at: now,
    }
}

fn free(pairs: &[(&str, u64)], held: &[(&str, u64)]) -> Free {
    let totals: BTreeMap<_, _> = pairs.iter().map(|(c, u)| ((*c).to_owned(), *u)).collect();
    let held: BTreeMap<_, _> = held.iter().map(|(c, u)| ((*c).to_owned(), *u)).collect();
    Free::new(totals, &held)
}

#[test]
fn free_is_what_the_backend_has_less_what_is_held() {
    let f = free(
        &[("l40s-48gb", 4), ("cpu-1c-2g", 1)],
        &[("l40s-48gb", 3), ("cpu-1c-2g", 5)],
    );
    assert_eq!(f.of("l40s-48gb"), 1);
    assert_eq!(f.of("cpu-1c-2g"), 0, "over-held never wraps around");
    assert_eq!(
        f.of("h100-80gb"),
        0,
        "a class the backend lacks has nothing free"
    );
}

#[test]
fn admission_takes_units_and_names_the_runtime_for_endpoints() {
    let catalog = Catalog::builtin();
    let mut f = free(&[("l40s-48gb", 3)], &[]);
    let w = workload(WorkloadKind::Endpoint, "l40s-48gb", 2, "openai-endpoint");
    let Decision::Admit { admission, reason } = place(&w, &catalog, false, &mut f) else {
        panic!("it fits");
    };
    assert_eq!(admission.placed_class, "l40s-48gb");
    assert_eq!(reason.text(), "admitted: 2 × l40s-48gb, served by vllm");
    assert_eq!(f.of("l40s-48gb"), 1);
    let nb = workload(WorkloadKind::Notebook, "l40s-48gb", 1, "jupyterlab");
    let Decision::Admit { reason, .. } = place(&nb, &catalog, false, &mut f) else {
        panic!("one unit is left");
    };
    assert_eq!(reason.text(), "admitted: 1 × l40s-48gb");
}

#[test]
fn a_workload_that_does_not_fit_waits_and_only_trusted_tenants_see_free_units() {
    let catalog = Catalog::builtin();
    let mut f = free(&[("l40s-48gb", 1)], &[]);
    let w = workload(WorkloadKind::Endpoint, "l40s-48gb", 2, "openai-endpoint");
    let Decision::Wait(untrusted) = place(&w, &catalog, false, &mut f) else {
        panic!("two don't fit in one");
    };
    assert_eq!(
        untrusted.text(),
        "waiting for l40s-48gb capacity: requested 2 GPU(s), not enough free right now"
    );
    let Decision::Wait(trusted) = place(&w, &catalog, true, &mut f) else {
        panic!("still no room");
    };
    assert_eq!(
        trusted.text(),
        "waiting for l40s-48gb capacity: requested 2 GPU(s), 1 free"
    );
    assert_eq!(f.of("l40s-48gb"), 1, "waiting takes nothing");
}

#[test]
fn a_class_or_image_gone_from_the_catalog_fails_it() {
    let catalog = Catalog::builtin();
    let mut f = free(&[("l40s-48gb", 1)], &[]);
    let gone_class = workload(WorkloadKind::Notebook, "retired-gpu", 1, "jupyterlab");
    assert_eq!(
        place(&gone_class, &catalog, false, &mut f),
        Decision::Fail(Reason::NoLongerOffered {
            entry: CatalogEntry::GpuClass,
            name: "retired-gpu".into()
        })
    );
    let gone_image = workload(WorkloadKind::Notebook, "l40s-48gb", 1, "old-image");
    assert!(matches!(
        place(&gone_image, &catalog, false, &mut f),
        Decision::Fail(Reason::NoLongerOffered {
            entry: CatalogEntry::Image,
            ..
        })
    ));
}

#[test]
fn a_spec_runs_on_the_placed_class_with_its_runtime() {
    let catalog = Catalog::builtin();
    let mut w = workload(WorkloadKind::Notebook, "cpu-1c-2g", 1, "jupyterlab");
    w.placed_class = Some("cpu-1c-2g".into());
    let spec = spec(&w, &catalog).unwrap();
    assert_eq!(
        (spec.class.as_str(), spec.runtime.as_str()),
        ("cpu-1c-2g", "jupyterlab-cpu")
    );
}

/// A pending `kind` on `class` of one unit whose fallback list is `fallback`, tried after
/// `after_s`.
fn with_fallback(
    kind: WorkloadKind,
    class: &str,
    image: &str,
    fallback: &[&str],
    after_s: Option<u32>,
) -> Workload {
    Workload {
        fallback: fallback.iter().map(|f| (*f).to_owned()).collect(),
        fallback_after_s: after_s,
        ..workload(kind, class, 1, image)
    }
}

fn names(classes: &[&einsora_core::catalog::ComputeClass]) -> Vec<String> {
    classes.iter().map(|c| c.name().to_owned()).collect()
}

#[test]
fn cpu_stands_for_the_cpu_class_closest_to_the_requested_one() {
    let catalog = Catalog::builtin();
    let endpoint = |class: &str, fallback: &[&str]| {
        with_fallback(
            WorkloadKind::Endpoint,
            class,
            "openai-endpoint",
            fallback,
            None,
        )
    };
    // An L40S class has 8 CPUs and 64 GiB: the smallest CPU class with as much.
    let l40s = endpoint("l40s-48gb", &["a100-80gb", "cpu"]);
    assert_eq!(
        names(&fallback::classes(&l40s, &catalog)),
        ["a100-80gb", "cpu-16c-64g"]
    );
    let small_mac = endpoint("apple-silicon-16gb", &["cpu"]);
    assert_eq!(
        names(&fallback::classes(&small_mac, &catalog)),
        ["cpu-4c-16g"]
    );
    // None is as large as an H200's 16 CPUs and 192 GiB: the largest there is.
    let h200 = endpoint("h200-141gb", &["cpu", "cpu-16c-64g", "retired-gpu"]);
    assert_eq!(
        names(&fallback::classes(&h200, &catalog)),
        ["cpu-16c-64g"],
        "each class once, and a class the catalog lacks is skipped"
    );
    // A VM image has no runtime on Apple classes.
    let vm = with_fallback(
        WorkloadKind::Vm,
        "l40s-48gb",
        "ubuntu-24.04",
        &["apple-silicon-32gb", "cpu"],
        None,
    );
    assert_eq!(names(&fallback::classes(&vm, &catalog)), ["cpu-16c-64g"]);
}

#[test]
fn fallbacks_are_due_after_their_wait() {
    let later = with_fallback(
        WorkloadKind::Endpoint,
        "l40s-48gb",
        "openai-endpoint",
        &["cpu"],
        Some(300),
    );
    assert!(!fallback::due(&later, Duration::from_secs(299)));
    assert!(fallback::due(&later, Duration::from_secs(300)));
    let at_once = Workload {
        fallback_after_s: None,
        ..later.clone()
    };
    assert!(fallback::due(&at_once, Duration::ZERO));
    let none = workload(WorkloadKind::Endpoint, "l40s-48gb", 1, "openai-endpoint");
    assert!(!fallback::due(&none, Duration::from_secs(3600)));
}

#[test]
fn a_fallback_admission_records_the_class_it_runs_on_and_says_why() {
    let catalog = Catalog::builtin();
    let w = with_fallback(
        WorkloadKind::Endpoint,
        "l40s-48gb",
        "openai-endpoint",
        &["a100-80gb", "cpu"],
        Some(300),
    );
    let mut f = free(
        &[("l40s-48gb", 0), ("a100-80gb", 0), ("cpu-16c-64g", 1)],
        &[],
    );
    let Decision::Wait(wait) = place(&w, &catalog, false, &mut f) else {
        panic!("no L40S is free");
    };
    assert_eq!(
        fallback::wait(&w, wait.clone(), false).text(),
        "waiting for l40s-48gb capacity: requested 1 GPU(s), not enough free right now; its \
         fallbacks are tried after 5m0s: a100-80gb, cpu"
    );
    assert_eq!(
        place_fallback(&w, &catalog, &mut f, |c| c.name() != "cpu-16c-64g"),
        None,
        "a class it may not take now is passed over"
    );
    let Some(Decision::Admit { admission, reason }) =
        place_fallback(&w, &catalog, &mut f, |_| true)
    else {
        panic!("the CPU class has room");
    };
    assert_eq!(admission.placed_class, "cpu-16c-64g");
    assert_eq!(
        reason.text(),
        "admitted: 1 × cpu-16c-64g, served by llama.cpp; a fallback: l40s-48gb had no room for 5m0s"
    );
    assert_eq!(f.of("cpu-16c-64g"), 0);
    assert_eq!(place_fallback(&w, &catalog, &mut f, |_| true), None);
    assert_eq!(
        fallback::wait(&w, wait, true).text(),
        "waiting for l40s-48gb capacity: requested 1 GPU(s), not enough free right now; its \
         fallbacks have no room either: a100-80gb, cpu"
    );
}
