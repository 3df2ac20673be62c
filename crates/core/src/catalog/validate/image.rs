//! Images: kinds, runtimes in order, driver_refs that the drivers and runtimes can honour, and
//! classes that exist.

use super::{Problems, check_name, entry, join, words};
use crate::accelerator::AcceleratorKind;
use crate::catalog::model::{ComputeClass, DriverRef, Image, Runtime};
use crate::catalog::raw::{RawDriverRef, RawImage, RawRuntime};
use crate::driver::{self, DriverInfo};
use crate::kind::WorkloadKind;

pub(super) fn images(
    raw: Vec<RawImage>,
    drivers: &[&'static DriverInfo],
    class_names: &[String],
    classes: &[ComputeClass],
    p: &mut Problems,
) -> Vec<Image> {
    if raw.is_empty() {
        p.add("images", "lists no images; the catalog needs at least one");
    }
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for raw in raw {
        let entry = entry("image", &raw.name);
        if seen.contains(&raw.name) {
            p.add(
                &entry,
                "is listed more than once; image names must be unique",
            );
            continue;
        }
        seen.push(raw.name.clone());
        let before = p.count();
        check_name(p, &entry, "image", &raw.name);
        let kinds: Vec<WorkloadKind> = words(p, &entry, "kinds", &raw.kinds);
        let runtimes = runtimes(&raw.runtimes, &entry, p);
        let driver_refs = driver_refs(&raw.driver_refs, &kinds, &runtimes, drivers, &entry, p);
        let image_classes = image_classes(raw.classes, &runtimes, class_names, classes, &entry, p);
        if p.count() == before {
            out.push(Image {
                name: raw.name,
                kinds,
                runtimes,
                driver_refs,
                classes: image_classes,
            });
        }
    }
    out
}

fn runtimes(raw: &[RawRuntime], entry: &str, p: &mut Problems) -> Vec<Runtime> {
    if raw.is_empty() {
        p.add(entry, "lists no runtimes");
    }
    let mut out: Vec<Runtime> = Vec::new();
    for runtime in raw {
        let name = &runtime.name;
        check_name(p, entry, "runtime", name);
        let field = format!("runtime {name:?} accelerators");
        let accelerators: Vec<AcceleratorKind> = words(p, entry, &field, &runtime.accelerators);
        if out.iter().any(|r| r.name == *name) {
            p.add(entry, format!("lists runtime {name:?} twice"));
        } else if !accelerators.is_empty()
            && accelerators
                .iter()
                .all(|a| out.iter().any(|r| r.runs_on(*a)))
        {
            p.add(
                entry,
                format!(
                    "runtime {name:?} is never used: runtimes before it cover all its accelerators"
                ),
            );
        }
        out.push(Runtime {
            name: name.clone(),
            accelerators,
        });
    }
    out
}

fn driver_refs(
    raw: &[RawDriverRef],
    kinds: &[WorkloadKind],
    runtimes: &[Runtime],
    enabled: &[&'static DriverInfo],
    entry: &str,
    p: &mut Problems,
) -> Vec<DriverRef> {
    let mut out: Vec<DriverRef> = Vec::new();
    for reference in raw {
        let name = &reference.driver;
        let field = format!("driver_refs {name:?} accelerators");
        let accelerators: Vec<AcceleratorKind> = words(p, entry, &field, &reference.accelerators);
        let Some(driver) = enabled.iter().copied().find(|d| d.name == name.as_str()) else {
            let why = if driver::lookup(name).is_some() {
                "is not enabled in the catalog's drivers"
            } else {
                "is not a driver Einsora has"
            };
            p.add(
                entry,
                format!("driver_refs names driver {name:?}, which {why}"),
            );
            continue;
        };
        if out.iter().any(|r| r.driver.name == driver.name) {
            p.add(entry, format!("driver_refs names driver {name:?} twice"));
            continue;
        }
        for &accelerator in &accelerators {
            if !runtimes.iter().any(|r| r.runs_on(accelerator)) {
                p.add(
                    entry,
                    format!("driver_refs lets {name} run it on {accelerator}, but it has no runtime for {accelerator}"),
                );
            }
            if !driver.accelerators.contains(&accelerator) {
                p.add(
                    entry,
                    format!("driver_refs: driver {name} does not run on {accelerator}"),
                );
            } else if !kinds.iter().any(|&k| driver.runs(k, accelerator)) {
                p.add(
                    entry,
                    format!(
                        "driver_refs: driver {name} runs none of its kinds ({}) on {accelerator}",
                        join(kinds)
                    ),
                );
            }
        }
        out.push(DriverRef {
            driver,
            accelerators,
        });
    }
    out
}

fn image_classes(
    raw: Option<Vec<String>>,
    runtimes: &[Runtime],
    class_names: &[String],
    classes: &[ComputeClass],
    entry: &str,
    p: &mut Problems,
) -> Option<Vec<String>> {
    let raw = raw?;
    if raw.is_empty() {
        p.add(
            entry,
            "has an empty classes list, so no class can use it; leave classes out to allow every class",
        );
    }
    for (i, name) in raw.iter().enumerate() {
        if !class_names.contains(name) {
            p.add(
                entry,
                format!("lists class {name:?}, which is not in the catalog's classes"),
            );
        } else if raw[..i].contains(name) {
            p.add(entry, format!("lists class {name:?} twice"));
        } else if let Some(class) = classes.iter().find(|c| c.name == *name) {
            let accelerator = class.accelerator;
            if !runtimes.iter().any(|r| r.runs_on(accelerator)) {
                p.add(
                    entry,
                    format!("lists class {name:?}, but has no runtime for its accelerator ({accelerator})"),
                );
            }
        }
    }
    Some(raw)
}
