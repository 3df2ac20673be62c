//! Compute classes: hardware that fits the accelerator, regions that exist, and device models
//! and Apple tiers that each point at exactly one class.

use super::{Problems, check_name, entry, join};
use crate::accelerator::AcceleratorKind::{self, Amd, Apple, Cpu, Nvidia};
use crate::catalog::model::{ComputeClass, DEFAULT_DISK_GIB, same_device_model};
use crate::catalog::raw::RawClass;
use crate::region::Region;

pub(super) fn classes(
    raw: Vec<RawClass>,
    regions: &[Region],
    p: &mut Problems,
) -> Vec<ComputeClass> {
    if raw.is_empty() {
        p.add(
            "classes",
            "lists no compute classes; the catalog needs at least one",
        );
    }
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for raw in raw {
        let entry = entry("class", &raw.name);
        if seen.contains(&raw.name) {
            p.add(
                &entry,
                "is listed more than once; class names must be unique",
            );
            continue;
        }
        seen.push(raw.name.clone());
        if let Some(class) = class(raw, &entry, regions, p) {
            out.push(class);
        }
    }
    shared_device_models(&out, p);
    shared_apple_tiers(&out, p);
    out
}

fn class(raw: RawClass, entry: &str, regions: &[Region], p: &mut Problems) -> Option<ComputeClass> {
    let before = p.count();
    check_name(p, entry, "class", &raw.name);
    let accelerator = match raw.accelerator.parse::<AcceleratorKind>() {
        Ok(a) => Some(a),
        Err(e) => {
            p.add(entry, e.to_string());
            None
        }
    };
    if raw.cpus == 0 {
        p.add(entry, "has cpus: 0; every class needs at least 1 CPU");
    }
    if raw.memory_gib == 0 {
        p.add(entry, "has memory_gib: 0; every class needs at least 1 GiB");
    }
    if raw.disk_gib == Some(0) {
        p.add(
            entry,
            "has disk_gib: 0; leave it out for the default, or give at least 1 GiB",
        );
    }
    if let Some(accelerator) = accelerator {
        hardware(&raw, accelerator, entry, p);
    }
    let class_regions = class_regions(raw.regions.as_deref(), regions, entry, p);
    let accelerator = accelerator?;
    if p.count() != before {
        return None;
    }
    Some(ComputeClass {
        name: raw.name,
        accelerator,
        devices: raw.devices,
        cpus: raw.cpus,
        memory_gib: raw.memory_gib,
        disk_gib: raw.disk_gib.unwrap_or(DEFAULT_DISK_GIB),
        unified_memory_gib: raw.unified_memory_gib,
        egress: raw.egress.unwrap_or(true),
        device_models: raw.models,
        regions: class_regions,
    })
}

fn hardware(raw: &RawClass, accelerator: AcceleratorKind, entry: &str, p: &mut Problems) {
    let devices = raw.devices;
    match accelerator {
        Nvidia | Amd => {
            if devices == 0 {
                p.add(
                    entry,
                    format!("is an {accelerator} class with devices: 0; it needs at least 1"),
                );
            }
            if raw.models.is_empty() {
                p.add(
                    entry,
                    format!(
                        "lists no device models, so no {accelerator} device would ever match it"
                    ),
                );
            }
        }
        Apple => {
            if devices != 1 {
                p.add(entry, format!("has devices: {devices}, but a Mac has one GPU: apple classes have devices: 1"));
            }
            match raw.unified_memory_gib {
                None | Some(0) => p.add(
                    entry,
                    "needs unified_memory_gib, the unified-memory tier of the Macs it matches",
                ),
                Some(tier) if raw.memory_gib > tier => p.add(
                    entry,
                    format!(
                        "reserves memory_gib: {}, more than its unified-memory tier of {tier} GiB",
                        raw.memory_gib
                    ),
                ),
                Some(_) => {}
            }
        }
        Cpu => {
            if devices != 0 {
                p.add(entry, format!("is a cpu class with devices: {devices}; cpu classes take no accelerator devices"));
            }
        }
    }
    if accelerator != Apple && raw.unified_memory_gib.is_some() {
        p.add(
            entry,
            "has unified_memory_gib, which only apple classes have",
        );
    }
    if !matches!(accelerator, Nvidia | Amd) && !raw.models.is_empty() {
        p.add(
            entry,
            "lists device models, but only nvidia and amd classes are matched by model",
        );
    }
    for (i, model) in raw.models.iter().enumerate() {
        if model.trim().is_empty() {
            p.add(entry, "lists an empty device model");
        } else if raw.models[..i].iter().any(|m| same_device_model(m, model)) {
            p.add(entry, format!("lists device model {model:?} twice"));
        }
    }
}

fn class_regions(
    raw: Option<&[String]>,
    known: &[Region],
    entry: &str,
    p: &mut Problems,
) -> Option<Vec<Region>> {
    let raw = raw?;
    if raw.is_empty() {
        p.add(entry, "has an empty regions list, so it is offered nowhere; leave regions out to offer it in every region");
    }
    let mut out: Vec<Region> = Vec::new();
    for name in raw {
        match Region::new(name) {
            Err(e) => p.add(entry, e.to_string()),
            Ok(region) if !known.contains(&region) => p.add(
                entry,
                format!(
                    "lists region {name:?}, which is not one of the catalog's regions ({})",
                    join(known)
                ),
            ),
            Ok(region) if out.contains(&region) => {
                p.add(entry, format!("lists region {name:?} twice"))
            }
            Ok(region) => out.push(region),
        }
    }
    Some(out)
}

fn shared_device_models(classes: &[ComputeClass], p: &mut Problems) {
    for (i, class) in classes.iter().enumerate() {
        for model in &class.device_models {
            if let Some(other) = classes[..i].iter().find(|o| o.matches_device_model(model)) {
                p.add(
                    &entry("class", &class.name),
                    format!(
                        "device model {model:?} is also listed by class {:?}; a device must match one class",
                        other.name
                    ),
                );
            }
        }
    }
}

fn shared_apple_tiers(classes: &[ComputeClass], p: &mut Problems) {
    for (i, class) in classes.iter().enumerate() {
        let Some(tier) = class.unified_memory_gib else {
            continue;
        };
        if let Some(other) = classes[..i]
            .iter()
            .find(|o| o.unified_memory_gib == Some(tier))
        {
            p.add(
                &entry("class", &class.name),
                format!(
                    "has the same unified-memory tier ({tier} GiB) as class {:?}; a Mac must match one class",
                    other.name
                ),
            );
        }
    }
}
