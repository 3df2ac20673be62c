//! Catalogs for tests and benches that run real notebooks on this machine.

use std::path::Path;

/// The built-in catalog with 1 GiB disks for `cpu-1c-2g` and `apple-silicon-32gb` (10 and 100
/// GiB built in, more than a test machine can promise to each of several notebooks), written
/// to `dir/catalog.yaml`; its path, for `EINSORA_CATALOG`.
pub fn with_small_disks(dir: &Path) -> String {
    let builtin = include_str!("../../../catalog/catalog.yaml");
    let class = "  - name: cpu-1c-2g\n    accelerator: cpu\n    cpus: 1\n    memory_gib: 2\n";
    let sized = format!("{class}    disk_gib: 10\n");
    assert!(
        builtin.contains(&sized),
        "the catalog's cpu-1c-2g moved: update this"
    );
    let text = builtin.replace(&sized, &format!("{class}    disk_gib: 1\n"));
    let apple = "  - name: apple-silicon-32gb\n    accelerator: apple\n    devices: 1\n    cpus: 8\n    \
                 memory_gib: 24\n    disk_gib: 100\n";
    assert!(
        text.contains(apple),
        "the catalog's apple-silicon-32gb moved: update this"
    );
    let text = text.replace(apple, &apple.replace("disk_gib: 100", "disk_gib: 1"));
    let path = dir.join("catalog.yaml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}
