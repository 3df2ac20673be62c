use std::collections::BTreeMap;

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
