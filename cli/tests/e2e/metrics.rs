//! Prometheus metrics, read by a real Prometheus (Debian's, which `scripts/test` unpacks and
//! names in `EINSORA_PROMETHEUS`): `einsora up` serves every role's at `/metrics/<role>` on its
//! metrics port; each passes `promtool check metrics`; Prometheus scrapes them all, and what it
//! answers to queries matches what the test did.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use einsora_testkit::Port;
use einsora_testkit::eventually_or;
use einsora_testkit::http::{exchange, request};
use einsora_testkit::spawn::{Spawned, Stop};
use serde_json::{Value, json};

use crate::harness::solo::Solo;
use crate::harness::workloads::{Owner, wait_for};
use crate::harness::world::{call, launch};

/// Every role `up` runs on the agent backend, and `up` itself.
const ROLES: [&str; 6] = [
    "api",
    "controller",
    "metering",
    "access",
    "gateway",
    "agent",
];
/// Workloads the test launches (the sim driver has this machine's CPUs, two here: one each).
const LAUNCHED: usize = 2;
/// The controller counts its region every 15 s; Prometheus scrapes every second.
const PATIENCE: Duration = Duration::from_secs(60);

#[test]
fn prometheus_scrapes_every_role_and_its_answers_match_what_happened() {
    let tools = std::env::var_os("EINSORA_PROMETHEUS")
        .map(PathBuf::from)
        .expect("EINSORA_PROMETHEUS names the directory of prometheus and promtool (scripts/test unpacks them)");
    let port = Port::loopback();
    let metrics = port.to_string();
    let mut solo = Solo::start(&[
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_AGENT_SIM", "true"),
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
        ("EINSORA_METRICS_ADDR", &metrics),
    ]);
    solo.hold(port);
    let owner = Owner::of(&solo);
    let notebook = |name: &str| {
        json!({ "kind": "notebook", "name": name, "gpu_class": "cpu-1c-2g",
                "image": "jupyterlab" })
    };
    let ids: Vec<String> = (0..LAUNCHED)
        .map(|i| launch(&solo, &owner.session, notebook(&format!("nb-{i}"))))
        .collect();
    for id in &ids {
        wait_for(&solo, &owner.session, id, "running");
    }
    let refused = call(
        &solo,
        &owner.session,
        "GET",
        "/v1/workloads/01a24397-0000-7000-8000-000000000000",
        None,
    );
    assert_eq!(refused.status, 404);

    // Each role's page, and up's own, in the format promtool checks.
    let paths = ROLES
        .iter()
        .map(|r| format!("/metrics/{r}"))
        .chain(["/metrics".to_owned()]);
    for path in paths {
        let page = exchange(&metrics, &request("GET", &path, &metrics, &[], ""));
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(
            page.header("content-type")
                .unwrap()
                .starts_with("text/plain; version=0.0.4"),
            "{path}: {:?}",
            page.headers
        );
        promtool_checks(&tools, &path, &page.body);
    }
    let missing = exchange(
        &metrics,
        &request("GET", "/metrics/nope", &metrics, &[], ""),
    );
    assert_eq!(missing.status, 404);
    assert!(
        missing.body.contains("/metrics/gateway"),
        "{}",
        missing.body
    );

    let prometheus = Prometheus::start(&tools, &metrics);
    let up = prometheus.eventually("every target up", "sum(up)", ROLES.len() as f64 + 1.0);
    assert_eq!(up, ROLES.len() as f64 + 1.0);
    let created = "sum(einsora_http_request_duration_seconds_count{role=\"gateway\",route=\"/v1/workloads\",method=\"POST\",code=\"202\"})";
    prometheus.eventually("the gateway's creates", created, LAUNCHED as f64);
    let not_found = "sum(einsora_http_request_duration_seconds_count{role=\"gateway\",route=\"/v1/workloads/{id}\",method=\"GET\",code=\"404\"})";
    prometheus.eventually("the refused read", not_found, 1.0);
    let rpc = "sum(einsora_grpc_server_handling_seconds_count{role=\"api\",method=\"CreateWorkload\",code=\"OK\"})";
    prometheus.eventually("the api's creates", rpc, LAUNCHED as f64);
    let steps = "sum(einsora_workload_transitions_total{from=\"new\",to=\"pending\"})";
    prometheus.eventually("the creates as steps", steps, LAUNCHED as f64);
    let running = "sum(einsora_workloads{role=\"controller\",state=\"running\"})";
    prometheus.eventually("the controller's census", running, LAUNCHED as f64);
    let online = "sum(einsora_machines{status=\"online\"})";
    prometheus.eventually("this machine online", online, 1.0);
    let streams = "sum(einsora_agent_streams)";
    prometheus.eventually("the agent's stream", streams, 1.0);
    let admitted = "sum(einsora_admissions_total{class=\"cpu-1c-2g\"})";
    prometheus.eventually("the admissions", admitted, LAUNCHED as f64);
    let queries = "sum(einsora_store_query_duration_seconds_count{role=\"api\",statement=\"insert\"}) > bool 0";
    prometheus.eventually("the api's store inserts", queries, 1.0);
    let cpu = "count(process_cpu_seconds_total)";
    prometheus.eventually("every process's CPU time", cpu, ROLES.len() as f64 + 1.0);
}

/// `promtool check metrics` passes `text`.
fn promtool_checks(tools: &std::path::Path, path: &str, text: &str) {
    use std::io::Write;
    let mut check = Command::new(tools.join("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics on {path}: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Prometheus server on loopback that scrapes each role every second, its data in a
/// directory of its own; stopped when dropped.
struct Prometheus {
    addr: String,
    process: Spawned,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(tools: &std::path::Path, metrics: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let mut config =
            String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n");
        let targets = ROLES.iter().map(|r| (*r, format!("/metrics/{r}")));
        for (role, path) in targets.chain([("up", "/metrics".to_owned())]) {
            config.push_str(&format!(
                "  - job_name: {role}\n    metrics_path: {path}\n    static_configs:\n      \
                 - targets: ['{metrics}']\n        labels: {{role: {role}}}\n"
            ));
        }
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let port = Port::loopback();
        let addr = port.to_string();
        drop(port);
        let mut command = Command::new(tools.join("prometheus"));
        command
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let process = Spawned::start(command, Stop::Kill).unwrap();
        Prometheus {
            addr,
            process,
            _dir: dir,
        }
    }

    /// The value of `query` (a single number), once it is `wanted`.
    fn eventually(&self, what: &str, query: &str, wanted: f64) -> f64 {
        eventually_or(
            what,
            PATIENCE,
            || self.value(query).filter(|v| *v == wanted),
            || {
                format!(
                    "{query} = {:?}, wanted {wanted}\n{}",
                    self.value(query),
                    self.process.logs()
                )
            },
        )
    }

    fn value(&self, query: &str) -> Option<f64> {
        let encoded: String = query
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let path = format!("/api/v1/query?query={encoded}");
        let answer = einsora_testkit::http::try_exchange(
            &self.addr,
            &request("GET", &path, &self.addr, &[], ""),
        )?;
        let body: Value = serde_json::from_str(&answer.body).ok()?;
        let result = body["data"]["result"].as_array()?;
        result.first()?["value"][1].as_str()?.parse().ok()
    }
}
