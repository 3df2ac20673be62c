//! A validated create body, checked against the catalog: the region exists, the class is
//! offered there, and the image runs the kind on the class's accelerator.

use einsora_core::catalog::Catalog;
use einsora_core::ids::{TenantId, WorkloadId};
use einsora_proto::convert::{ConvertError, CreateWorkload};
use einsora_store::{NewWorkload, UnitShape};

/// What a fallback list may name besides catalog classes: any CPU class (the seeds' fallbacks).
const CPU_FALLBACK: &str = "cpu";

pub fn check(
    catalog: &Catalog,
    tenant: TenantId,
    req: CreateWorkload,
) -> Result<NewWorkload, ConvertError> {
    let region = match req.region {
        None => catalog.default_region().clone(),
        Some(region) if catalog.has_region(&region) => region,
        Some(_) => {
            return Err(ConvertError::invalid(
                "region",
                format!(
                    "use one of this installation's regions: {}",
                    names(catalog.regions())
                ),
            ));
        }
    };
    let class = catalog.class(&req.gpu_class).ok_or_else(|| {
        ConvertError::invalid(
            "gpu_class",
            "it is not a class of this installation's catalog",
        )
    })?;
    if !class.offered_in(&region) {
        return Err(ConvertError::invalid(
            "gpu_class",
            format!("it is not offered in region {region}"),
        ));
    }
    let image = catalog.image(&req.image).ok_or_else(|| {
        ConvertError::invalid("image", "it is not an image of this installation's catalog")
    })?;
    if !image.supports(req.kind) {
        return Err(ConvertError::invalid(
            "image",
            format!("it doesn't run as a {}", req.kind),
        ));
    }
    if image
        .classes()
        .is_some_and(|only| !only.iter().any(|c| c == class.name()))
    {
        return Err(ConvertError::invalid(
            "image",
            format!("it is limited to other classes than {}", class.name()),
        ));
    }
    if image.runtime_for(class.accelerator()).is_none() {
        return Err(ConvertError::invalid(
            "image",
            format!(
                "it has no runtime for {}'s accelerator ({})",
                class.name(),
                class.accelerator()
            ),
        ));
    }
    for (i, name) in req.fallback.iter().enumerate() {
        let offered =
            name == CPU_FALLBACK || catalog.class(name).is_some_and(|c| c.offered_in(&region));
        if !offered {
            return Err(ConvertError::invalid(
                format!("fallback[{i}]"),
                format!("use `{CPU_FALLBACK}` or a class offered in region {region}"),
            ));
        }
    }
    Ok(NewWorkload {
        id: WorkloadId::new(),
        tenant_id: tenant,
        // The caller's, set by the service.
        owner: None,
        kind: req.kind,
        name: req.name,
        // A CPU class takes no devices, but counts as one unit per workload against quota.
        units: class.devices().max(1),
        shape: UnitShape::of(class),
        gpu_class: req.gpu_class,
        image: req.image,
        region,
        fallback: req.fallback,
        fallback_after_s: req.fallback_after_s,
        params: req.params.to_json(),
        trace_context: None,
    })
}

fn names(regions: &[einsora_core::region::Region]) -> String {
    regions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use einsora_core::kind::WorkloadKind;
    use einsora_core::region::Region;
    use einsora_proto::convert::WorkloadParams;

    use super::*;

    const TWO_REGIONS: &str = r#"
regions: [local, remote]
drivers: [sim]
classes:
  - {name: l40s-48gb, accelerator: nvidia, devices: 2, cpus: 8, memory_gib: 64, models: ["NVIDIA L40S"]}
  - {name: only-remote, accelerator: nvidia, devices: 1, cpus: 8, memory_gib: 64, models: ["X"], regions: [remote]}
  - {name: cpu-1c-2g, accelerator: cpu, cpus: 1, memory_gib: 2}
  - {name: apple-silicon-32gb, accelerator: apple, devices: 1, cpus: 8, memory_gib: 24, unified_memory_gib: 32}
images:
  - name: jupyterlab
    kinds: [notebook]
    runtimes: [{name: cuda, accelerators: [nvidia]}, {name: cpu, accelerators: [cpu]}]
    driver_refs: [{driver: sim, accelerators: [nvidia, cpu]}]
  - name: pinned
    kinds: [notebook]
    runtimes: [{name: cuda, accelerators: [nvidia]}]
    driver_refs: [{driver: sim, accelerators: [nvidia]}]
    classes: [only-remote]
"#;

    fn catalog() -> Catalog {
        Catalog::from_yaml(TWO_REGIONS).unwrap()
    }

    fn notebook(class: &str) -> CreateWorkload {
        CreateWorkload {
            kind: WorkloadKind::Notebook,
            name: "nb".into(),
            gpu_class: class.into(),
            image: "jupyterlab".into(),
            region: None,
            fallback: vec![],
            fallback_after_s: None,
            params: WorkloadParams::Notebook,
        }
    }

    fn refused(req: CreateWorkload) -> ConvertError {
        check(&catalog(), TenantId::new(), req).expect_err("accepted")
    }

    #[test]
    fn defaults_the_region_and_counts_units() {
        let tenant = TenantId::new();
        let w = check(&catalog(), tenant, notebook("l40s-48gb")).unwrap();
        assert_eq!(
            (w.region.as_str(), w.units, w.tenant_id),
            ("local", 2, tenant)
        );
        assert_eq!(w.params, "{}");
        let cpu = check(&catalog(), tenant, notebook("cpu-1c-2g")).unwrap();
        assert_eq!(cpu.units, 1, "a CPU class is one unit");
        let remote = CreateWorkload {
            region: Some(Region::new("remote").unwrap()),
            ..notebook("only-remote")
        };
        assert_eq!(
            check(&catalog(), tenant, remote).unwrap().region.as_str(),
            "remote"
        );
    }

    #[test]
    fn each_catalog_mismatch_names_its_field() {
        let elsewhere = CreateWorkload {
            region: Some(Region::new("mars").unwrap()),
            ..notebook("l40s-48gb")
        };
        assert_eq!(refused(elsewhere).field, "region");
        assert_eq!(refused(notebook("h100-80gb")).field, "gpu_class");
        assert_eq!(
            refused(notebook("only-remote")).field,
            "gpu_class",
            "not offered in local"
        );
        let unknown_image = CreateWorkload {
            image: "nope".into(),
            ..notebook("l40s-48gb")
        };
        assert_eq!(refused(unknown_image).field, "image");
        let wrong_kind = CreateWorkload {
            kind: WorkloadKind::Vm,
            params: WorkloadParams::Vm {
                ssh_authorized_keys: vec![],
                disk_gib: None,
            },
            ..notebook("l40s-48gb")
        };
        let err = refused(wrong_kind);
        assert_eq!(
            err.to_string(),
            "image is not valid: it doesn't run as a vm"
        );
        let no_runtime = refused(notebook("apple-silicon-32gb"));
        assert_eq!(
            no_runtime.to_string(),
            "image is not valid: it has no runtime for apple-silicon-32gb's accelerator (apple)"
        );
        let pinned = CreateWorkload {
            image: "pinned".into(),
            ..notebook("l40s-48gb")
        };
        assert_eq!(refused(pinned).field, "image");
    }

    #[test]
    fn fallbacks_are_cpu_or_classes_offered_in_the_region() {
        let ok = CreateWorkload {
            fallback: vec!["cpu-1c-2g".into(), "cpu".into()],
            fallback_after_s: Some(60),
            ..notebook("l40s-48gb")
        };
        assert!(check(&catalog(), TenantId::new(), ok).is_ok());
        let bad = CreateWorkload {
            fallback: vec!["cpu".into(), "only-remote".into()],
            ..notebook("l40s-48gb")
        };
        assert_eq!(refused(bad).field, "fallback[1]");
    }
}
