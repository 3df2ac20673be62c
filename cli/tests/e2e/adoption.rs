//! The docker driver across agent restarts and changes on its machine: containers adopted when
//! their sandbox is unchanged, stopped as changed when it isn't; a notebook's lost disk never
//! replaced by a fresh one; no engine, or no image, said so in the timeline.

use std::process::Command;

use serde_json::json;

use crate::harness::cli::{Cli, dev_password};
use crate::harness::notebooks::{
    containers, data_dir, notebook, open, run_cell, solo, solo_with, token,
};
use crate::harness::solo::Solo;
use crate::harness::workloads::{act, state, timeline, wait_for};
use crate::harness::world::{Tenant, call, login, tenant};

/// A running notebook of `acme`'s; its ID.
fn running_notebook(solo: &Solo, acme: &Tenant) -> String {
    let id =
        crate::harness::world::launch(solo, &acme.token, crate::harness::world::a_notebook("nb"));
    wait_for(solo, &acme.session, &id, "running");
    id
}

fn is_running(container: &str) -> bool {
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", container])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "true"
}

/// An image like the notebook's but with another ID; removed when dropped.
struct ChangedImage(&'static str);

impl ChangedImage {
    fn build() -> ChangedImage {
        let tag = "einsora/notebook:changed-by-test";
        let mut build = Command::new("docker");
        build
            .args(["build", "--network", "none", "-t", tag, "-"])
            .env("DOCKER_BUILDKIT", "0");
        let dockerfile = "FROM einsora/notebook:local\nLABEL einsora.test=changed\n";
        let built = crate::harness::support::fed(build, dockerfile);
        assert!(
            built.status.success(),
            "docker build: {}",
            crate::harness::support::stderr(&built)
        );
        ChangedImage(tag)
    }
}

impl Drop for ChangedImage {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", self.0]).output();
    }
}

/// `einsora up` restarted: the notebook's container is adopted (the same one, still serving
/// its files, its timeline untouched), and what it printed before and after reaches
/// `einsora logs` redacted, each line once. Restarted with another image for its runtime: its old
/// container is stopped and it fails as sandbox-changed; started again, it runs on the new
/// image with its saved files.
#[test]
fn an_agent_restart_adopts_containers_and_a_changed_sandbox_is_stopped() {
    let (mut solo, _leftovers) = solo();
    // Opened just after `up` restarts, before its machine says where it listens, the proxy
    // answers 503 "it isn't ready yet" (not a fault: nothing logged above DEBUG), and `open`
    // tries again.
    solo.expect_log("its sandbox changed; stopping it");
    let mut acme = tenant(&solo, "dev@acme");
    let id = running_notebook(&solo, &acme);
    let (host, cookie) = open(&solo, &acme.session, &id);
    let file = json!({ "type": "file", "format": "text", "content": "kept" }).to_string();
    notebook(
        &solo,
        &host,
        &cookie,
        "PUT",
        "/api/contents/kept.txt",
        &file,
    );
    let print = |marker: &str| {
        format!("import os\nos.write(2, b'{marker} tsk_abcdefghijklmnop\\n')\nprint('ok')")
    };
    assert_eq!(
        run_cell(&solo, &host, &cookie, &print("before-restart")),
        "ok\n"
    );
    let first = Cli::with_token(&solo, token(&acme)).logs_until(&id, "before-restart");
    assert!(
        first.contains("before-restart tsk_abcd…"),
        "redacted: {first}"
    );
    let before = timeline(&solo, &acme.session, &id);
    let container = containers(&id);
    assert_eq!(container.len(), 1, "{container:?}");

    solo.restart();
    // Dev mode's passwords are new at every start: a new session (the API token still works).
    acme.session = login(&solo, "dev@acme", &dev_password(&solo, "dev@acme"));
    let (host, cookie) = open(&solo, &acme.session, &id);
    let kept = notebook(&solo, &host, &cookie, "GET", "/api/contents/kept.txt", "");
    assert_eq!(kept["content"], "kept");
    assert_eq!(containers(&id), container, "the same container, adopted");
    assert!(is_running(&container[0]));
    let after = timeline(&solo, &acme.session, &id);
    let steps = |t: &[String]| t.iter().filter(|e| !e.starts_with("note:")).count();
    assert_eq!(steps(&after), steps(&before), "no step: nothing restarted");
    assert_eq!(
        run_cell(&solo, &host, &cookie, &print("after-restart")),
        "ok\n"
    );
    let second = Cli::with_token(&solo, token(&acme)).logs_until(&id, "after-restart");
    assert!(second.starts_with(&first), "{first}\n---\n{second}");
    for marker in ["before-restart", "after-restart"] {
        let times = second.lines().filter(|l| l.contains(marker)).count();
        assert_eq!(times, 1, "{marker} once: {second}");
    }

    let changed = ChangedImage::build();
    let images = format!("jupyterlab-cpu={}", changed.0);
    solo.restart_with(&[("EINSORA_DOCKER_IMAGES", &images)]);
    acme.session = login(&solo, "dev@acme", &dev_password(&solo, "dev@acme"));
    wait_for(&solo, &acme.session, &id, "failed");
    let reason = "failed: its sandbox changed; start it again to run under the new one with its \
                  saved data";
    assert_eq!(timeline(&solo, &acme.session, &id).last().unwrap(), reason);
    assert!(!is_running(&container[0]), "the old container was stopped");

    assert_eq!(act(&solo, &acme.token, &id, "start").0, 202);
    wait_for(&solo, &acme.session, &id, "running");
    let (host, cookie) = open(&solo, &acme.session, &id);
    let kept = notebook(&solo, &host, &cookie, "GET", "/api/contents/kept.txt", "");
    assert_eq!(
        kept["content"], "kept",
        "its saved data, under the new sandbox"
    );
    let now = containers(&id);
    let image = Command::new("docker")
        .args(["inspect", "-f", "{{.Config.Image}}"])
        .args(&now)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&image.stdout).trim(), changed.0);
}

/// A notebook that ran before and lost its disk fails as such, never with a fresh one.
/// Its class gone from the catalog (`einsora up` restarted with one that no longer has it), a
/// running notebook keeps running in the container it was made in, still serving its files,
/// and can be stopped and deleted.
#[test]
fn a_running_notebook_outlives_its_class_leaving_the_catalog() {
    let (mut solo, leftovers) = solo();
    // Opened just after `up` restarts, before its machine says where it listens, the proxy
    // answers 503 "it isn't ready yet" (not a fault: nothing logged above DEBUG), and `open`
    // tries again.
    let mut acme = tenant(&solo, "dev@acme");
    let id = running_notebook(&solo, &acme);
    let container = containers(&id);
    let catalog = std::fs::read_to_string(leftovers.models().join("catalog.yaml")).unwrap();
    let class = "  - name: cpu-1c-2g\n";
    assert!(
        catalog.contains(class),
        "the tests' class moved: update this"
    );
    let retired = leftovers.models().join("retired.yaml");
    std::fs::write(
        &retired,
        catalog.replace(class, "  - name: cpu-1c-2g-new\n"),
    )
    .unwrap();

    solo.restart_with(&[("EINSORA_CATALOG", retired.to_str().unwrap())]);
    acme.session = login(&solo, "dev@acme", &dev_password(&solo, "dev@acme"));
    let (host, cookie) = open(&solo, &acme.session, &id);
    let listed = notebook(&solo, &host, &cookie, "GET", "/api/contents", "");
    assert_eq!(listed["type"], "directory", "it still serves: {listed}");
    std::thread::sleep(crate::harness::agents::PASSES);
    assert_eq!(
        state(&solo, &acme.session, &id),
        "running",
        "{:?}",
        timeline(&solo, &acme.session, &id)
    );
    assert_eq!(containers(&id), container, "the same container");
    assert!(is_running(&container[0]));

    assert_eq!(act(&solo, &acme.token, &id, "stop").0, 202);
    wait_for(&solo, &acme.session, &id, "stopped");
    assert!(!is_running(&container[0]), "stopped on its machine");
    assert_eq!(act(&solo, &acme.token, &id, "delete").0, 202);
    wait_for(&solo, &acme.session, &id, "deleted");
    assert!(containers(&id).is_empty(), "removed from its machine");
}

#[test]
fn a_notebook_whose_disk_is_gone_is_not_given_a_fresh_one() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let id = running_notebook(&solo, &acme);
    assert_eq!(act(&solo, &acme.token, &id, "stop").0, 202);
    wait_for(&solo, &acme.session, &id, "stopped");
    crate::harness::notebooks::lose_its_disk(&solo, &id);
    assert_eq!(act(&solo, &acme.token, &id, "start").0, 202);
    wait_for(&solo, &acme.session, &id, "failed");
    let steps = timeline(&solo, &acme.session, &id);
    assert_eq!(
        steps.last().unwrap(),
        "failed: its disk is missing on its machine"
    );
    assert!(!data_dir(&solo, &id).exists(), "no fresh disk was made");
}

/// No engine answering: the machine offers no docker driver, and a notebook waits, saying so.
#[test]
fn without_an_engine_a_notebook_waits_for_a_driver() {
    let (solo, _leftovers) = solo_with(&[
        ("EINSORA_DOCKER_SOCKET", "/nonexistent/docker.sock"),
        // Else the linux-native driver would take it (what `auto` is for).
        ("EINSORA_AGENT_NATIVE", "off"),
    ]);
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "notebook", "name": "nb", "gpu_class": "cpu-1c-2g",
                       "image": "jupyterlab" });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "queued");
    assert_eq!(
        timeline(&solo, &acme.session, &id)[1],
        "queued: waiting for a machine with a driver that runs notebooks on cpu-1c-2g: none \
         here has one yet"
    );
    let machines = call(&solo, &acme.session, "GET", "/v1/machines", None).json();
    assert_eq!(machines["machines"][0]["drivers"], json!([]), "{machines}");
}

/// An image the engine doesn't have and can't pull: the workload fails with its reason.
#[test]
fn an_image_that_cannot_be_had_fails_with_its_reason() {
    let images = "jupyterlab-cpu=einsora/absent:never-built";
    let (solo, _leftovers) = solo_with(&[("EINSORA_DOCKER_IMAGES", images)]);
    solo.expect_log("pull failed");
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "notebook", "name": "nb", "gpu_class": "cpu-1c-2g",
                       "image": "jupyterlab" });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "failed");
    assert_eq!(
        timeline(&solo, &acme.session, &id).last().unwrap(),
        "failed: its image isn't available on its machine"
    );
    assert!(containers(&id).is_empty());
    assert_eq!(state(&solo, &acme.session, &id), "failed");
}
