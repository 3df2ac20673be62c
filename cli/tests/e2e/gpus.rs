//! GPUs end to end on the agent backend: a machine whose `nvidia-smi` (a stand-in, named by
//! EINSORA_NVIDIA_SMI, replaying two H100s in nvidia-smi's format) lists two GPUs. Two GPU
//! notebooks get one each, by UUID; a third waits for capacity with the real free count; a
//! stop frees its GPU for the waiter; an agent restart keeps every workload on its GPU; a GPU
//! that vanishes leaves the machine's page, and its holder is never started on it again.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use einsora_testkit::eventually_or;
use serde_json::Value;

use crate::harness::agents::*;
use crate::harness::engine_proxy::{EngineProxy, GpusBy};
use crate::harness::solo::Solo;
use crate::harness::workloads::{Owner, act, create, timeline, wait_for};
use crate::harness::world::call;

const CLASS: &str = "h100-80gb";

/// The built-in catalog with the H100 class's CPUs and memory cut to what this test machine has
/// (2 CPUs), written into `dir`; its path, for EINSORA_CATALOG.
fn catalog_that_fits_here(dir: &Path) -> String {
    let builtin = concat!(env!("CARGO_MANIFEST_DIR"), "/../catalog/catalog.yaml");
    let text = std::fs::read_to_string(builtin).unwrap();
    let h100 = "  - name: h100-80gb\n    accelerator: nvidia\n    devices: 1\n    cpus: 16\n    memory_gib: 128\n";
    assert!(text.contains(h100), "the H100 class moved");
    let small = h100
        .replace("cpus: 16", "cpus: 1")
        .replace("memory_gib: 128", "memory_gib: 1");
    let path = dir.join("catalog.yaml");
    std::fs::write(&path, text.replace(h100, &small)).unwrap();
    path.to_str().unwrap().to_owned()
}
const TWO_H100S: &str =
    include_str!("../../../agent/tests/fixtures/inventory/nvidia-smi-2x-h100.csv");

/// A stand-in `nvidia-smi` in `dir` that prints the file `answer` holds as it runs, and to the
/// GPU usage query `<answer>.usage` (nothing while there is none).
fn stand_in(dir: &Path, answer: &Path) -> PathBuf {
    let script = dir.join("nvidia-smi");
    let answer = answer.display();
    let body = format!(
        "#!/bin/sh\ncase \"$*\" in\n*utilization.gpu*) cat '{answer}.usage' 2>/dev/null || true ;;\n\
         *) cat '{answer}' ;;\nesac\n"
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// Who holds each of the machine's GPUs, by UUID, as its page says.
fn holders(solo: &Solo, owner: &Owner, machine: &str) -> BTreeMap<String, Vec<String>> {
    let read = call(
        solo,
        &owner.session,
        "GET",
        &format!("/v1/machines/{machine}"),
        None,
    );
    assert_eq!(read.status, 200, "{}", read.body);
    let machine: Value = read.json();
    machine["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let held = d["workload_ids"].as_array().unwrap();
            let held = held
                .iter()
                .map(|w| w.as_str().unwrap().to_owned())
                .collect();
            (d["uuid"].as_str().unwrap().to_owned(), held)
        })
        .collect()
}

/// The GPU `workload` holds, once the machine's page says it holds one.
fn gpu_of(solo: &Solo, owner: &Owner, machine: &str, workload: &str) -> String {
    eventually_or(
        "the workload holding a GPU",
        PATIENCE,
        || {
            let held = holders(solo, owner, machine);
            held.into_iter()
                .find(|(_, by)| by.iter().any(|w| w == workload))
                .map(|(uuid, _)| uuid)
        },
        || format!("{:?}", holders(solo, owner, machine)),
    )
}

fn launch(solo: &Solo, owner: &Owner, name: &str) -> String {
    let (status, made) = create(solo, &owner.session, name, CLASS);
    assert_eq!(status, 202, "{made}");
    made["id"].as_str().unwrap().to_owned()
}

#[test]
fn gpu_notebooks_get_their_own_gpus_by_uuid_and_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog_that_fits_here(dir.path());
    let (solo, lan, agents) = solo(&[("EINSORA_CATALOG", catalog.as_str())]);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let machine = join(&solo, &owner, &lan, &agents, "gpubox");
    let answer = solo.e.dir().join("nvidia-smi-answer");
    std::fs::write(&answer, TWO_H100S).unwrap();
    let nvidia_smi = stand_in(solo.e.dir(), &answer);
    let env = [
        ("EINSORA_NVIDIA_SMI", nvidia_smi.to_str().unwrap()),
        ("EINSORA_AGENT_INVENTORY_EVERY", "1s"),
    ];
    let agent = run_agent_with(&solo, &machine, &env);
    online(&solo, &owner, &machine.id, &agent);
    let uuids: Vec<String> = holders(&solo, &owner, &machine.id).into_keys().collect();
    assert_eq!(uuids.len(), 2, "both GPUs listed: {uuids:?}");

    let a = launch(&solo, &owner, "a");
    let b = launch(&solo, &owner, "b");
    wait_for(&solo, who, &a, "running");
    wait_for(&solo, who, &b, "running");
    let (gpu_a, gpu_b) = (
        gpu_of(&solo, &owner, &machine.id, &a),
        gpu_of(&solo, &owner, &machine.id, &b),
    );
    assert_ne!(gpu_a, gpu_b, "one GPU each");

    let c = launch(&solo, &owner, "c");
    let waiting = format!("queued: waiting for {CLASS} capacity: requested 1 GPU(s), 0 free");
    eventually_or(
        "the third waiting with the real free count",
        PATIENCE,
        || timeline(&solo, who, &c).contains(&waiting).then_some(()),
        || format!("{:?}", timeline(&solo, who, &c)),
    );

    assert_eq!(act(&solo, who, &a, "stop").0, 202);
    wait_for(&solo, who, &a, "stopped");
    wait_for(&solo, who, &c, "running");
    assert_eq!(
        gpu_of(&solo, &owner, &machine.id, &c),
        gpu_a,
        "the waiter gets the GPU a stop freed"
    );

    // Restarted, the agent adopts both, each on its own GPU still.
    drop(agent);
    let agent = run_agent_with(&solo, &machine, &env);
    online(&solo, &owner, &machine.id, &agent);
    wait_for(&solo, who, &b, "running");
    wait_for(&solo, who, &c, "running");
    let held = holders(&solo, &owner, &machine.id);
    assert_eq!(held[&gpu_a], vec![c.clone()], "{held:?}");
    assert_eq!(held[&gpu_b], vec![b.clone()], "{held:?}");

    // b's GPU falls off the bus: gone from the machine's page at the next read.
    let kept: String = TWO_H100S
        .lines()
        .filter(|l| !l.starts_with(&gpu_b))
        .collect();
    std::fs::write(&answer, kept).unwrap();
    eventually_or(
        "the vanished GPU gone from the machine's page",
        PATIENCE,
        || (!holders(&solo, &owner, &machine.id).contains_key(&gpu_b)).then_some(()),
        || {
            format!(
                "{:?}\n{}",
                holders(&solo, &owner, &machine.id),
                agent.logs()
            )
        },
    );
    assert_eq!(holders(&solo, &owner, &machine.id)[&gpu_a], vec![c.clone()]);
    // Stopped, b can't start again on this machine's one GPU, which c holds: it waits.
    assert_eq!(act(&solo, who, &b, "stop").0, 202);
    wait_for(&solo, who, &b, "stopped");
    assert_eq!(act(&solo, who, &b, "start").0, 202);
    eventually_or(
        "b waiting, not started without a GPU",
        PATIENCE,
        || {
            let steps = timeline(&solo, who, &b);
            steps
                .last()
                .filter(|s| s.starts_with("queued: waiting for"))
                .cloned()
        },
        || format!("{:?}", timeline(&solo, who, &b)),
    );
}

/// How busy each GPU is, sampled every second from `nvidia-smi`: on the machine's page per
/// device, and on a GPU workload's own (its GPUs by UUID, their memory used).
#[test]
fn gpu_use_is_on_the_machines_page_and_each_gpu_workloads() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog_that_fits_here(dir.path());
    let (solo, lan, agents) = solo(&[("EINSORA_CATALOG", catalog.as_str())]);
    let owner = Owner::of(&solo);
    let machine = join(&solo, &owner, &lan, &agents, "gpubox");
    let answer = solo.e.dir().join("nvidia-smi-answer");
    std::fs::write(&answer, TWO_H100S).unwrap();
    let uuids: Vec<&str> = TWO_H100S
        .lines()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    let usage = format!("{}, 87, 20480\n{}, 3, 512\n", uuids[0], uuids[1]);
    std::fs::write(answer.with_extension("usage"), usage).unwrap();
    let nvidia_smi = stand_in(solo.e.dir(), &answer);
    let env = [
        ("EINSORA_NVIDIA_SMI", nvidia_smi.to_str().unwrap()),
        ("EINSORA_AGENT_GPU_SAMPLE_EVERY", "1s"),
    ];
    let agent = run_agent_with(&solo, &machine, &env);
    online(&solo, &owner, &machine.id, &agent);
    let a = launch(&solo, &owner, "a");
    wait_for(&solo, &owner.session, &a, "running");
    let gpu = gpu_of(&solo, &owner, &machine.id, &a);

    let path = format!("/v1/machines/{}", machine.id);
    let used_on_page = eventually_or(
        "each GPU's use on the machine's page",
        PATIENCE,
        || {
            let read: Value = call(&solo, &owner.session, "GET", &path, None).json();
            let devices = read["devices"].as_array()?.clone();
            devices
                .iter()
                .all(|d| d["gpu_use"].is_object())
                .then_some(devices)
        },
        || agent.logs(),
    );
    for d in &used_on_page {
        let (percent, mib): (u32, u64) = if d["uuid"] == uuids[0] {
            (87, 20480)
        } else {
            (3, 512)
        };
        assert_eq!(d["gpu_use"]["utilization_percent"], percent, "{d}");
        assert_eq!(
            d["gpu_use"]["memory_used_bytes"],
            (mib << 20).to_string(),
            "{d}"
        );
        assert!(d["gpu_use"]["sampled_at"].is_string(), "{d}");
    }
    let read: Value = call(
        &solo,
        &owner.session,
        "GET",
        &format!("/v1/workloads/{a}"),
        None,
    )
    .json();
    assert_eq!(read["device_uuids"], serde_json::json!([gpu]), "{read}");
    let mib: u64 = if gpu == uuids[0] { 20480 } else { 512 };
    assert_eq!(
        read["gpu_use"]["memory_used_bytes"],
        (mib << 20).to_string(),
        "{read}"
    );
}

/// The UUIDs of the GPUs in TWO_H100S, in its order.
fn two_h100_uuids() -> Vec<String> {
    TWO_H100S
        .lines()
        .filter_map(|l| l.split(',').next())
        .map(str::to_owned)
        .collect()
}

/// The exact request the docker driver sends the engine for a GPU notebook, on an engine that
/// says it has the NVIDIA runtime (a recording proxy in front of the real one, which has none):
/// the GPU placement gave, by UUID, with the `gpu` capability, and nothing else changed about
/// the sandbox; the engine's own inspect shows the container it made with that request. The
/// real engine can't start it (it has no NVIDIA runtime), so the workload fails, saying so.
#[test]
fn the_docker_driver_asks_the_engine_for_exactly_the_reserved_gpu() {
    asks_for_exactly_the_reserved_gpu(
        GpusBy::Runtime,
        |gpu| serde_json::json!([{ "Driver": "nvidia", "DeviceIDs": [gpu], "Capabilities": [["gpu"]] }]),
    );
}

/// The same on an engine with CDI on (Docker 28.2 and later, no NVIDIA runtime) whose spec
/// names the GPUs both by index and by UUID: the driver asks the engine's `cdi` device driver
/// for the reserved GPU's CDI device by its UUID, never by index.
#[test]
fn on_a_cdi_engine_the_docker_driver_asks_for_the_reserved_gpus_cdi_device() {
    let mut devices = vec!["nvidia.com/gpu=0".to_owned(), "nvidia.com/gpu=1".to_owned()];
    devices.extend(
        two_h100_uuids()
            .iter()
            .map(|u| format!("nvidia.com/gpu={u}")),
    );
    devices.push("nvidia.com/gpu=all".to_owned());
    asks_for_exactly_the_reserved_gpu(
        GpusBy::Cdi(devices),
        |gpu| serde_json::json!([{ "Driver": "cdi", "DeviceIDs": [format!("nvidia.com/gpu={gpu}")] }]),
    );
}

fn asks_for_exactly_the_reserved_gpu(gpus: GpusBy, wanted: impl Fn(&str) -> Value) {
    use crate::harness::notebooks::{containers, solo_as_owner};
    let proxy = EngineProxy::start(Path::new("/var/run/docker.sock"), gpus);
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog_that_fits_here(dir.path());
    let text = std::fs::read_to_string(&catalog).unwrap();
    let h100 = "  - name: h100-80gb\n    accelerator: nvidia\n    devices: 1\n    cpus: 1\n    memory_gib: 1\n    disk_gib: 200\n";
    assert!(text.contains(h100), "the H100 class moved");
    std::fs::write(
        &catalog,
        text.replace(h100, &h100.replace("disk_gib: 200", "disk_gib: 1")),
    )
    .unwrap();
    let answer = dir.path().join("nvidia-smi-answer");
    std::fs::write(&answer, TWO_H100S).unwrap();
    let nvidia_smi = stand_in(dir.path(), &answer);
    let (solo, _leftovers) = solo_as_owner(&[
        ("EINSORA_DOCKER_SOCKET", proxy.socket.to_str().unwrap()),
        ("EINSORA_NVIDIA_SMI", nvidia_smi.to_str().unwrap()),
        ("EINSORA_CATALOG", catalog.as_str()),
        // The CUDA image isn't built here: the CPU one stands in, the request being the test.
        (
            "EINSORA_DOCKER_IMAGES",
            "jupyterlab-cuda=einsora/notebook:local",
        ),
    ]);
    solo.expect_log("the docker engine failed a pass");
    let owner = Owner::of(&solo);
    let (status, made) = create(&solo, &owner.session, "train", CLASS);
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    let body = eventually_or(
        "the driver asking the engine for its container",
        PATIENCE,
        || proxy.created().into_iter().next(),
        || solo.logs(),
    );
    let read: Value = call(
        &solo,
        &owner.session,
        "GET",
        &format!("/v1/workloads/{id}"),
        None,
    )
    .json();
    let gpu = read["device_uuids"][0].as_str().unwrap().to_owned();
    assert!(TWO_H100S.contains(&gpu), "{read}");
    let wanted = wanted(&gpu);
    assert_eq!(body["HostConfig"]["DeviceRequests"], wanted, "{body}");
    assert!(
        body["HostConfig"].get("PortBindings").is_none(),
        "it publishes no port: {body}"
    );
    assert_eq!(
        body["HostConfig"]["CapDrop"],
        serde_json::json!(["ALL"]),
        "{body}"
    );

    // The proxy records the request before the engine has answered it.
    let made = eventually_or(
        "the engine making the container it was asked for",
        PATIENCE,
        || Some(containers(&id)).filter(|made| !made.is_empty()),
        || solo.logs(),
    );
    assert_eq!(made.len(), 1, "{made:?}");
    let inspected = std::process::Command::new("docker")
        .args([
            "inspect",
            "--format",
            "{{json .HostConfig.DeviceRequests}}",
            &made[0],
        ])
        .output()
        .unwrap();
    let inspected: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    // As the engine keeps it: those IDs, and no count (a count would be "any N GPUs").
    let kept = &inspected[0];
    assert_eq!(inspected.as_array().map(Vec::len), Some(1), "{inspected}");
    for field in ["Driver", "DeviceIDs", "Capabilities"] {
        assert_eq!(
            kept[field], wanted[0][field],
            "the engine made it with that request"
        );
    }
    assert_eq!(kept["Count"], 0, "{inspected}");
    wait_for(&solo, &owner.session, &id, "failed");
}

/// On the real engine, which has no NVIDIA runtime, a machine whose nvidia-smi lists two H100s
/// offers CPU only and its page says why, in words its owner can act on; a GPU notebook waits
/// for a machine that can run its class, never started on CPU instead.
#[test]
fn an_engine_without_the_nvidia_runtime_offers_cpu_only_and_says_why() {
    offers_cpu_only_and_says(None, "install the NVIDIA container toolkit");
}

/// An engine whose CDI spec names the GPUs by index only (`nvidia-ctk cdi generate`'s default
/// name strategy) can't be asked for a GPU by its UUID: CPU only, and the page says how to
/// regenerate the spec.
#[test]
fn an_engine_whose_cdi_names_gpus_by_index_only_offers_cpu_only_and_says_why() {
    let by_index = ["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"];
    let gpus = GpusBy::Cdi(by_index.iter().map(|d| (*d).to_owned()).collect());
    offers_cpu_only_and_says(Some(gpus), "--device-name-strategy=uuid");
}

/// `gpus`: what a recording proxy in front of the real engine says it can do (the real engine
/// as it is, without one).
fn offers_cpu_only_and_says(gpus: Option<GpusBy>, says: &str) {
    use crate::harness::notebooks::solo_as_owner;
    let dir = tempfile::tempdir().unwrap();
    let answer = dir.path().join("nvidia-smi-answer");
    std::fs::write(&answer, TWO_H100S).unwrap();
    let nvidia_smi = stand_in(dir.path(), &answer);
    let proxy = gpus.map(|g| EngineProxy::start(Path::new("/var/run/docker.sock"), g));
    let mut settings = vec![("EINSORA_NVIDIA_SMI", nvidia_smi.to_str().unwrap())];
    if let Some(proxy) = &proxy {
        settings.push(("EINSORA_DOCKER_SOCKET", proxy.socket.to_str().unwrap()));
    }
    let (solo, _leftovers) = solo_as_owner(&settings);
    let owner = Owner::of(&solo);
    let machine = eventually_or(
        "this machine listing its GPUs",
        PATIENCE,
        || {
            let read: Value = call(&solo, &owner.session, "GET", "/v1/machines", None).json();
            let first = read["machines"].get(0)?.clone();
            (first["devices"].as_array()?.len() == 2).then_some(first)
        },
        || solo.logs(),
    );
    let note = machine["gpu_note"].as_str().unwrap();
    assert!(note.contains(says), "{machine}");
    let (status, made) = create(&solo, &owner.session, "train", CLASS);
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap();
    let waiting = format!("queued: waiting for a machine that can run {CLASS} to come online");
    eventually_or(
        "the GPU notebook waiting for a machine that can run it",
        PATIENCE,
        || {
            timeline(&solo, &owner.session, id)
                .contains(&waiting)
                .then_some(())
        },
        || format!("{:?}", timeline(&solo, &owner.session, id)),
    );
}
