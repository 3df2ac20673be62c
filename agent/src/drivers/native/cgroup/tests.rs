//! The files the agent writes, in a stand-in tree laid out as the kernel's (mkdir there makes
//! no control files, so only what is written appears). The real hierarchy is e2e
//! `native::a_native_notebook_is_held_to_its_class`.

use super::*;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const TWO_CPUS_2_GIB: Limits = Limits {
    cpus: 2,
    memory_bytes: 2 << 30,
};

/// cgroup v1 as a hybrid system mounts it: a hierarchy per controller, swap accounted.
fn legacy(root: &Path, swap: bool) {
    for c in CONTROLLERS {
        std::fs::create_dir_all(root.join(c)).unwrap();
        std::fs::write(root.join(c).join("cgroup.procs"), "1\n").unwrap();
    }
    if swap {
        std::fs::write(root.join("memory/memory.memsw.limit_in_bytes"), "0").unwrap();
    }
}

#[test]
fn on_cgroup_v1_each_controller_gets_its_limit_and_swap_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    legacy(root, true);
    let hierarchy = Hierarchy::detect(root).unwrap();
    assert_eq!(
        hierarchy,
        Hierarchy::Legacy {
            root: root.to_owned(),
            swap: true
        }
    );
    let cgroup = hierarchy.make("w1", TWO_CPUS_2_GIB).unwrap();
    let at = |c: &str, f: &str| read(&root.join(c).join("einsora/w1").join(f));
    assert_eq!(at("memory", "memory.limit_in_bytes"), "2147483648");
    assert_eq!(at("memory", "memory.memsw.limit_in_bytes"), "2147483648");
    assert_eq!(at("cpu", "cpu.cfs_period_us"), "100000");
    assert_eq!(at("cpu", "cpu.cfs_quota_us"), "200000", "two CPUs' time");
    assert_eq!(at("pids", "pids.max"), "256", "as a container's");
    assert_eq!(
        cgroup.joins(),
        CONTROLLERS.map(|c| root.join(c).join("einsora/w1/cgroup.procs"))
    );
    assert_eq!(
        cgroup.members(),
        root.join("memory/einsora/w1/cgroup.procs")
    );
    assert_eq!(hierarchy.of("w1"), cgroup, "found again by its workload");
}

#[test]
fn without_swap_accounting_or_a_memory_figure_nothing_more_is_written() {
    let dir = tempfile::tempdir().unwrap();
    legacy(dir.path(), false);
    let hierarchy = Hierarchy::detect(dir.path()).unwrap();
    let no_memory = Limits {
        cpus: 1,
        memory_bytes: 0,
    };
    hierarchy.make("w1", no_memory).unwrap();
    let memory = dir.path().join("memory/einsora/w1");
    assert!(memory.is_dir());
    assert!(!memory.join("memory.limit_in_bytes").exists());
    assert!(!memory.join("memory.memsw.limit_in_bytes").exists());
    assert_eq!(
        read(&dir.path().join("cpu/einsora/w1/cpu.cfs_quota_us")),
        "100000"
    );
}

#[test]
fn a_hierarchy_without_a_controller_is_named_and_not_used() {
    let dir = tempfile::tempdir().unwrap();
    legacy(dir.path(), true);
    std::fs::remove_dir_all(dir.path().join("pids")).unwrap();
    let why = Hierarchy::detect(dir.path()).unwrap_err();
    assert!(why.contains("pids controller"), "{why}");

    let v2 = tempfile::tempdir().unwrap();
    std::fs::write(
        v2.path().join("cgroup.controllers"),
        "cpuset cpu io memory\n",
    )
    .unwrap();
    let why = Hierarchy::detect(v2.path()).unwrap_err();
    assert!(why.contains("lacks the pids controller"), "{why}");
    assert!(!v2.path().join(PARENT).exists(), "nothing made");
}

#[test]
fn on_cgroup_v2_the_controllers_are_handed_down_and_the_limits_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids\n",
    )
    .unwrap();
    let hierarchy = Hierarchy::detect(root).unwrap();
    assert_eq!(hierarchy, Hierarchy::Unified(root.to_owned()));
    for dir in [root.to_owned(), root.join(PARENT)] {
        assert_eq!(
            read(&dir.join("cgroup.subtree_control")),
            "+memory +cpu +pids"
        );
    }
    let cgroup = hierarchy.make("w1", TWO_CPUS_2_GIB).unwrap();
    let w1 = root.join("einsora/w1");
    assert_eq!(read(&w1.join("cpu.max")), "200000 100000");
    assert_eq!(read(&w1.join("memory.max")), "2147483648");
    assert!(
        !w1.join("memory.swap.max").exists(),
        "a kernel without swap accounting has no such file, and none is made"
    );
    assert_eq!(read(&w1.join("pids.max")), "256");
    assert_eq!(cgroup.joins(), [w1.join("cgroup.procs")]);
    assert_eq!(cgroup.members(), w1.join("cgroup.procs"));
}

#[test]
fn removing_a_cgroup_that_is_gone_is_done() {
    let dir = tempfile::tempdir().unwrap();
    legacy(dir.path(), false);
    let hierarchy = Hierarchy::detect(dir.path()).unwrap();
    hierarchy.of("never-made").remove().unwrap();
}
