//! Fallback placement and aging, on the fake backend and on node agents, with the timelines
//! word for word.

use std::sync::Arc;
use std::time::Duration;

use einsora_core::lifecycle::State;
use einsora_core::machine::Machine;
use einsora_core::reasons::{Reason, UserAction};
use einsora_core::workload::Workload;
use einsora_store::NewWorkload;
use einsora_testkit::fixtures::{l40s, new_workload, registration, shape_of};
use time::OffsetDateTime;

use super::{World, timers, user, world};
use crate::agents::{AgentBackend, Hub};

impl World {
    /// An endpoint on `class` of `units`, whose fallback list is `fallback`, tried after
    /// `after_s`.
    async fn create_with(
        &self,
        name: &str,
        class: &str,
        units: u32,
        fallback: &[&str],
        after_s: Option<u32>,
    ) -> Workload {
        let new = NewWorkload {
            kind: einsora_core::kind::WorkloadKind::Endpoint,
            gpu_class: class.into(),
            units,
            shape: shape_of(class),
            image: "openai-endpoint".into(),
            fallback: fallback.iter().map(|f| (*f).to_owned()).collect(),
            fallback_after_s: after_s,
            ..new_workload(self.tenant, name)
        };
        let created = Reason::Created { by: user() };
        self.store.create_workload(&new, &created).await.unwrap()
    }

    /// The reconciler places on node agents: one machine of the tenant's, `box`, online, with
    /// the docker driver, 64 CPUs, 512 GiB and `gpus` L40Ss.
    async fn on_agents(&mut self, gpus: usize) {
        let mut reg = registration(self.tenant, "box", Some(OffsetDateTime::now_utc()));
        reg.machine = Machine {
            cpus: 64,
            memory_bytes: 512 << 30,
            devices: (0..gpus).map(|i| l40s(&format!("GPU-{i}"))).collect(),
            ..reg.machine
        };
        self.store.put_machine(&reg).await.unwrap();
        let hub = Arc::new(Hub::new(Duration::from_secs(45)));
        hub.connected(reg.machine.id);
        self.reconciler.backend = Arc::new(AgentBackend::new(
            Arc::clone(&hub),
            Duration::from_secs(600),
        ));
        self.reconciler.agents = Some(hub);
    }
}

const CREATED: &str = "pending: created by you@example.com (browser session)";

#[tokio::test]
async fn after_its_wait_a_workload_runs_on_its_fallback_and_keeps_its_requested_class() {
    let mut w = world(&[("l40s-48gb", 0), ("cpu-16c-64g", 1)], &[], timers()).await;
    let llm = w
        .create_with("llm", "l40s-48gb", 1, &["cpu"], Some(1))
        .await;
    w.pass().await;
    assert_eq!(w.state(&llm).await, State::Queued, "not before its wait");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    w.pass().await;
    let ran = w.get(&llm).await;
    assert_eq!(ran.state, State::Running);
    assert_eq!(
        (ran.gpu_class.as_str(), ran.placed_class.as_deref()),
        ("l40s-48gb", Some("cpu-16c-64g"))
    );
    assert_eq!(
        w.timeline(&llm).await,
        [
            CREATED,
            "queued: waiting for l40s-48gb capacity: requested 1 GPU(s), not enough free right \
             now; its fallback is tried after 1s: cpu",
            "provisioning: admitted: 1 × cpu-16c-64g, served by llama.cpp; a fallback: \
             l40s-48gb had no room for 1s",
            "running: ready",
        ]
    );
}

/// Freed capacity goes to the class's own waiters first: a workload earlier in the queue that
/// would take it only as a fallback waits.
#[tokio::test]
async fn a_class_goes_to_its_own_waiters_before_another_classs_fallbacks() {
    let mut w = world(&[("l40s-48gb", 0), ("a100-80gb", 1)], &[], timers()).await;
    let early = w
        .create_with("early", "l40s-48gb", 1, &["a100-80gb"], None)
        .await;
    let own = w.create_with("own", "a100-80gb", 1, &[], None).await;
    w.pass().await;
    assert_eq!(w.state(&own).await, State::Running);
    assert_eq!(
        w.timeline(&early).await,
        [
            CREATED,
            "queued: waiting for l40s-48gb capacity: requested 1 GPU(s), not enough free right \
             now; its fallback has no room either: a100-80gb",
        ]
    );
    w.request(&own, State::Deleting, UserAction::Delete).await;
    w.pass().await;
    w.pass().await;
    assert_eq!(
        w.timeline(&early).await[2..],
        [
            "provisioning: admitted: 1 × a100-80gb, served by vllm; a fallback: l40s-48gb had \
             no room",
            "running: ready",
        ]
    );
}

#[tokio::test]
async fn an_aged_request_holds_back_smaller_ones_of_its_class_until_it_starts() {
    let mut t = timers();
    t.aging_after = Duration::from_millis(150);
    let mut w = world(&[("l40s-48gb", 3)], &[], t).await;
    let holder = w.create_with("holder", "l40s-48gb", 2, &[], None).await;
    w.pass().await;
    let big = w.create_with("big", "l40s-48gb", 2, &[], None).await;
    w.pass().await;
    assert_eq!(w.state(&big).await, State::Queued);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let small = w.create_with("small", "l40s-48gb", 1, &[], None).await;
    for _ in 0..3 {
        w.pass().await;
    }
    assert_eq!(
        w.state(&small).await,
        State::Queued,
        "it would fit, but not ahead of the aged one"
    );
    assert_eq!(
        w.timeline(&big).await,
        [
            CREATED,
            "queued: waiting for l40s-48gb capacity: requested 2 GPU(s), not enough free right \
             now",
            "note: holding back smaller l40s-48gb requests for it: it has waited over 150ms",
        ],
        "noted once, not every pass"
    );
    assert_eq!(
        w.timeline(&small).await,
        [
            CREATED,
            "queued: waiting behind a larger l40s-48gb request that has waited over 150ms",
        ]
    );
    w.request(&holder, State::Deleting, UserAction::Delete)
        .await;
    w.pass().await;
    w.pass().await;
    assert_eq!(
        w.timeline(&big).await[3..],
        [
            "provisioning: admitted: 2 × l40s-48gb, served by vllm",
            "running: ready"
        ]
    );
    assert_eq!(
        w.timeline(&small).await[2..],
        [
            "provisioning: admitted: 1 × l40s-48gb, served by vllm",
            "running: ready"
        ]
    );
}

#[tokio::test]
async fn on_agents_a_workload_falls_back_to_cpu_on_its_machine() {
    let mut w = world(&[], &[], timers()).await;
    w.on_agents(1).await;
    let holder = w.create_with("holder", "l40s-48gb", 1, &[], None).await;
    w.pass().await;
    assert_eq!(w.state(&holder).await, State::Provisioning);
    let llm = w
        .create_with("llm", "l40s-48gb", 1, &["h100-80gb", "cpu"], Some(1))
        .await;
    w.pass().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    w.pass().await;
    let placed = w.get(&llm).await;
    assert_eq!(placed.state, State::Provisioning);
    assert_eq!(placed.placed_class.as_deref(), Some("cpu-16c-64g"));
    assert_eq!(placed.driver.as_deref(), Some("docker"));
    assert!(placed.devices.is_empty(), "a CPU class takes no GPU");
    assert_eq!(
        w.timeline(&llm).await,
        [
            CREATED,
            "queued: waiting for l40s-48gb capacity: requested 1 GPU(s), not enough free right \
             now; its fallbacks are tried after 1s: h100-80gb, cpu",
            "provisioning: admitted: 1 × cpu-16c-64g, served by llama.cpp on box with docker; \
             a fallback: l40s-48gb had no room for 1s",
        ]
    );
}

#[tokio::test]
async fn on_agents_an_aged_request_holds_back_smaller_ones_of_its_class() {
    let mut t = timers();
    t.aging_after = Duration::from_millis(150);
    let mut w = world(&[], &[], t).await;
    w.on_agents(3).await;
    let holder = w.create_with("holder", "l40s-48gb", 2, &[], None).await;
    w.pass().await;
    assert_eq!(w.state(&holder).await, State::Provisioning);
    let big = w.create_with("big", "l40s-48gb", 2, &[], None).await;
    w.pass().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let small = w.create_with("small", "l40s-48gb", 1, &[], None).await;
    w.pass().await;
    w.pass().await;
    assert_eq!(
        w.timeline(&big).await,
        [
            CREATED,
            "queued: waiting for l40s-48gb capacity: requested 2 GPU(s), not enough free right \
             now",
            "note: holding back smaller l40s-48gb requests for it: it has waited over 150ms",
        ]
    );
    assert_eq!(
        w.timeline(&small).await,
        [
            CREATED,
            "queued: waiting behind a larger l40s-48gb request that has waited over 150ms",
        ]
    );
    // Once the aged one is gone, the smaller one backfills again.
    w.request(&big, State::Deleting, UserAction::Delete).await;
    w.pass().await;
    w.pass().await;
    assert_eq!(
        w.timeline(&small).await[2..],
        ["provisioning: admitted: 1 × l40s-48gb, served by vllm on box with docker"]
    );
}
