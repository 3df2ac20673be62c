//! Crash consistency: four clients run 300 lifecycle operations while the controller is killed
//! with SIGKILL 20 times, each at a random moment after it started leading, and started again;
//! the operations are spread over the kills. Afterwards everything settles, and an offline replay
//! of every timeline against the state machine finds nothing wrong.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use einsora_core::lifecycle::State;
use serde_json::json;

use einsora_testkit::eventually;

use crate::harness::controllers::{Controller, lease_holder, stack};
use crate::harness::replay::{self, Acknowledged};
use crate::harness::solo::{Engine, Solo};
use crate::harness::world::{Credential, call, tenant};

const CLIENTS: usize = 4;
const OPERATIONS: usize = 300;
const KILLS: usize = 20;

const TIMERS: [(&str, &str); 5] = [
    ("EINSORA_CONTROLLER_INTERVAL", "100ms"),
    // Long enough that a leader on a loaded machine doesn't give it up by itself.
    ("EINSORA_CONTROLLER_LEASE", "2s"),
    ("EINSORA_FAKE_READY_DELAY", "150ms"),
    ("EINSORA_FAKE_CAPACITY", "cpu-1c-2g=1000"),
    ("EINSORA_LOG", "warn"),
];

#[test]
fn killing_the_controller_at_random_points_loses_and_breaks_nothing_on_sqlite() {
    crash(Engine::Sqlite);
}

#[test]
fn killing_the_controller_at_random_points_loses_and_breaks_nothing_on_postgres() {
    crash(Engine::Postgres);
}

/// A small deterministic generator, seeded per run (printed, to replay a failure).
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn crash(engine: Engine) {
    let (solo, catalog) = stack(engine, None, &TIMERS);
    let owner = tenant(&solo, "dev@acme");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}");
    let mut random = Random(seed);
    let controller = Mutex::new(Controller::start(&solo, &catalog, &TIMERS));
    let done = AtomicUsize::new(0);
    let acknowledged = Mutex::new(Vec::new());
    let kills = AtomicUsize::new(0);
    let settled = AtomicBool::new(false);
    let rt = tokio::runtime::Runtime::new().unwrap();
    std::thread::scope(|s| {
        for client in 0..CLIENTS {
            let (solo, who) = (&solo, &owner.token);
            let (done, kills, acknowledged) = (&done, &kills, &acknowledged);
            let mut random = Random(seed.wrapping_mul(client as u64 + 7) | 1);
            s.spawn(move || client_ops(solo, who, client, &mut random, done, kills, acknowledged));
        }
        // The killer is also the supervisor: a controller that stopped by itself starts again.
        s.spawn(|| {
            while !settled.load(Ordering::SeqCst) {
                let (pid, exited) = {
                    let mut current = controller.lock().unwrap();
                    (
                        current.pid(),
                        current.exits_within(Duration::ZERO).is_some(),
                    )
                };
                if exited {
                    *controller.lock().unwrap() = Controller::start(&solo, &catalog, &TIMERS);
                    continue;
                }
                if kills.load(Ordering::SeqCst) == KILLS
                    || lease_holder(&solo.database) != Some(pid)
                {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                std::thread::sleep(Duration::from_millis(random.below(400) as u64));
                let mut current = controller.lock().unwrap();
                std::mem::replace(&mut *current, Controller::start(&solo, &catalog, &TIMERS))
                    .kill();
                kills.fetch_add(1, Ordering::SeqCst);
            }
        });
        while done.load(Ordering::SeqCst) < OPERATIONS || kills.load(Ordering::SeqCst) < KILLS {
            std::thread::sleep(Duration::from_millis(20));
        }
        eventually("every workload settles", Duration::from_secs(120), || {
            (rt.block_on(replay::unsettled(&solo.database)) == 0).then_some(())
        });
        settled.store(true, Ordering::SeqCst);
    });
    let acknowledged = acknowledged.into_inner().unwrap();
    assert!(acknowledged.len() >= OPERATIONS);
    let findings = rt.block_on(replay::check(&solo.database, &acknowledged));
    eprintln!(
        "{} workloads, {} events, {} acknowledged operations, {KILLS} kills",
        findings.workloads,
        findings.events,
        acknowledged.len()
    );
    assert!(findings.clean(), "{findings:#?}");
    // No faults were injected and the runtime outlives its controller: nothing failed, and
    // nothing needed a note.
    let failed_or_noted = solo.query(
        "SELECT count(*) FROM workload_events WHERE to_state = 'failed' OR from_state = to_state",
    );
    assert_eq!(failed_or_noted.trim(), "0");
}

/// Operations until the clients together have `OPERATIONS` acknowledged: create, or an action
/// that the workload's current state allows (a race with the controller may still refuse it).
fn client_ops(
    solo: &Solo,
    who: &Credential,
    client: usize,
    random: &mut Random,
    done: &AtomicUsize,
    kills: &AtomicUsize,
    acknowledged: &Mutex<Vec<Acknowledged>>,
) {
    let mut mine: Vec<String> = Vec::new();
    let mut made = 0;
    while done.load(Ordering::SeqCst) < OPERATIONS {
        // Spread the operations over the kills: each controller's life sees its share.
        let share = (kills.load(Ordering::SeqCst) + 1) * OPERATIONS / KILLS;
        if done.load(Ordering::SeqCst) >= share && kills.load(Ordering::SeqCst) < KILLS {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let ack = if mine.len() < 3 || random.below(4) == 0 {
            made += 1;
            let body = json!({
                "kind": "notebook", "name": format!("c{client}-{made}"),
                "gpu_class": "cpu-1c-2g", "image": "jupyterlab",
            });
            let answer = call(solo, who, "POST", "/v1/workloads", Some(body));
            (answer.status == 202).then(|| {
                let id = answer.json()["id"].as_str().unwrap().to_owned();
                mine.push(id.clone());
                (id, State::Pending, "created by")
            })
        } else {
            let id = mine[random.below(mine.len())].clone();
            let now = call(solo, who, "GET", &format!("/v1/workloads/{id}"), None);
            let state = now.json()["state"].as_str().unwrap_or("deleted").to_owned();
            let (method, action, to, reason) = match state.as_str() {
                "running" | "provisioning" => {
                    ("POST", "stop", State::Stopping, "stop requested by")
                }
                "stopped" | "failed" if random.below(3) > 0 => {
                    ("POST", "start", State::Pending, "start requested by")
                }
                "deleting" | "deleted" => {
                    mine.retain(|m| *m != id);
                    continue;
                }
                _ => ("DELETE", "", State::Deleting, "delete requested by"),
            };
            let path = match action {
                "" => format!("/v1/workloads/{id}"),
                action => format!("/v1/workloads/{id}/{action}"),
            };
            let body = (method == "POST").then(|| json!({}));
            let answer = call(solo, who, method, &path, body);
            (answer.status == 202).then_some((id, to, reason))
        };
        if let Some((workload, state, reason)) = ack {
            acknowledged.lock().unwrap().push(Acknowledged {
                workload,
                state,
                reason,
            });
            done.fetch_add(1, Ordering::SeqCst);
        }
    }
}
