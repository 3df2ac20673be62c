//! Hollow agents: many machine identities in this one process, each enrolled with its own
//! token (the real Enroll RPC, pinned TLS, a CSR) and holding its own Sync stream over mutual
//! TLS, against one real controller on the agent backend. Reports the controller's RSS per
//! connected agent, its CPU at steady state, and the p99 from a workload's admission (its
//! `provisioning` row) to its machine receiving the desired state that runs it.
//!
//! `cargo bench -p einsora --bench agents` (BENCH_AGENTS=1000,5000,10000 by default).

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use einsora_core::ids::{EnrolmentTokenId, TenantId, UserId};
use einsora_core::lifecycle::State;
use einsora_core::region::Region;
use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::enrolment_service_client::EnrolmentServiceClient;
use einsora_proto::agent::v1::sync_service_client::SyncServiceClient;
use einsora_runtime::pki::{IssuedCert, Role, fingerprint};
use einsora_runtime::tls::ClientTls;
use einsora_store::{DatabaseUrl, NewEnrolmentToken, NewTenant, NewUser, QuotaClass, secret_hash};
use time::OffsetDateTime;
use tokio_stream::wrappers::ReceiverStream;

use support::{created_by_bench, einsora, free_addr, install, notebook};

/// When each workload's desired state reached its machine.
type Received = Arc<Mutex<HashMap<String, OffsetDateTime>>>;

fn main() -> anyhow::Result<()> {
    let counts: Vec<usize> = std::env::var("BENCH_AGENTS")
        .unwrap_or_else(|_| "1000,5000,10000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    println!(
        "{:>7} {:>10} {:>12} {:>10} {:>9} {:>9}",
        "agents", "ctl RSS MB", "KiB / agent", "ctl CPU %", "push p50", "push p99"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for n in counts {
        rt.block_on(run(n))?;
    }
    Ok(())
}

async fn run(n: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite:{}/einsora.db", dir.path().display());
    let agents_addr = free_addr()?;
    let env: Vec<(String, String)> = [
        ("EINSORA_DATA_DIR", dir.path().display().to_string()),
        ("EINSORA_DATABASE_URL", url.clone()),
        ("EINSORA_CONTROLLER_ADDR", free_addr()?),
        ("EINSORA_AGENT_ADDR", agents_addr.clone()),
        ("EINSORA_CLUSTER_BACKEND", "agent".into()),
        ("EINSORA_CONTROLLER_INTERVAL", "1s".into()),
        ("EINSORA_LOG", "warn".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    install(&env)?;
    let (store, _) = einsora_store::migrate(&DatabaseUrl::parse(&url)?).await?;
    let tenant = TenantId::new();
    let owner = NewTenant {
        id: tenant,
        slug: "owner".into(),
        name: "Owner".into(),
        trusted: true,
    };
    store.create_tenant(&owner).await?;
    store.set_quota(tenant, &QuotaClass::Default, None).await?;
    let user = UserId::new();
    let you = NewUser {
        id: user,
        tenant_id: tenant,
        email: "owner@bench".into(),
        display_name: "Owner".into(),
        phc: "$argon2id$unused".into(),
    };
    store.create_user(&you).await?;
    let ca_pem = std::fs::read_to_string(dir.path().join("pki/ca.pem"))?;
    let pin = fingerprint(&ca_pem)?;
    let pin_hex: String = pin.iter().map(|b| format!("{b:02x}")).collect();
    let mut tokens = Vec::with_capacity(n);
    for i in 0..n {
        let token = format!("enr_bench{i:027}.{pin_hex}");
        store
            .create_enrolment_token(&NewEnrolmentToken {
                id: EnrolmentTokenId::new(),
                tenant_id: tenant,
                name: format!("hollow-{i}"),
                region: Region::new("local")?,
                prefix: token.chars().take(8).collect(),
                token_hash: secret_hash(&token),
                created_by: user,
                expires_at: OffsetDateTime::now_utc() + time::Duration::hours(1),
            })
            .await?;
        tokens.push(token);
    }
    let mut controller = einsora(&["controller"], &env).spawn()?;
    let pid = controller.id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = rss_kib(pid)?;

    let received: Received = Arc::default();
    let enrol_tls = ClientTls::pinned(pin, Role::Controller)?;
    let mut streams = Vec::with_capacity(n);
    for (i, token) in tokens.into_iter().enumerate() {
        let key = rcgen::KeyPair::generate()?;
        let csr_pem = rcgen::CertificateParams::default()
            .serialize_request(&key)?
            .pem()?;
        let channel = connect(&enrol_tls, &agents_addr).await?;
        let enrolled = EnrolmentServiceClient::new(channel)
            .enroll(pb::EnrollRequest {
                enrolment_token: token,
                csr_pem,
                hostname: format!("hollow-{i}"),
            })
            .await?
            .into_inner();
        let own = IssuedCert {
            cert_pem: enrolled.certificate_chain_pem,
            key_pem: key.serialize_pem(),
        };
        let tls = ClientTls::new(&ca_pem, Some(&own), Role::Controller)?;
        streams.push(tokio::spawn(hollow(
            tls,
            agents_addr.clone(),
            Arc::clone(&received),
        )));
    }
    // Let every stream settle into steady state, then measure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss = rss_kib(pid)?;
    let cpu = cpu_percent(pid, Duration::from_secs(10)).await?;

    let pushes = 50.min(n);
    let mut ids = Vec::with_capacity(pushes);
    let by = created_by_bench();
    for i in 0..pushes {
        let w = notebook(tenant, &format!("push-{i}"));
        store.create_workload(&w, &by).await?;
        ids.push(w.id);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut ms = Vec::new();
    for id in &ids {
        let admitted = store
            .events(*id)
            .await?
            .into_iter()
            .find(|e| e.to == State::Provisioning && !e.is_note())
            .map(|e| e.at);
        let got = received.lock().unwrap().get(&id.to_string()).copied();
        if let (Some(admitted), Some(got)) = (admitted, got) {
            ms.push((got - admitted).as_seconds_f64() * 1000.0);
        }
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        ms.get(((ms.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(f64::NAN)
    };
    let per_agent = rss.saturating_sub(baseline) as f64 / n as f64;
    println!(
        "{n:>7} {:>10.1} {per_agent:>12.1} {cpu:>10.1} {:>9.1} {:>9.1}   ({} of {pushes} pushes seen)",
        rss as f64 / 1024.0,
        at(0.5),
        at(0.99),
        ms.len()
    );
    for s in streams {
        s.abort();
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    controller.wait()?;
    Ok(())
}

async fn connect(tls: &ClientTls, addr: &str) -> anyhow::Result<tonic::transport::Channel> {
    Ok(tls.connect(addr).await?)
}

/// One hollow agent: its inventory, then heartbeats; notes when each workload's desired state
/// first arrives.
async fn hollow(tls: ClientTls, addr: String, received: Received) -> anyhow::Result<()> {
    let channel = tls.connect(&addr).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let inventory = pb::Inventory {
        hostname: "hollow".into(),
        os: "linux".into(),
        arch: "x86_64".into(),
        cpus: 4,
        memory_bytes: 8 << 30,
        devices: vec![],
        drivers: vec!["sim".into()],
        agent_version: "bench".into(),
    };
    tx.send(pb::AgentReport {
        report: Some(pb::agent_report::Report::Inventory(inventory)),
    })
    .await?;
    let mut desired = SyncServiceClient::new(channel)
        .sync(ReceiverStream::new(rx))
        .await?
        .into_inner();
    let mut heartbeat = tokio::time::interval(Duration::from_secs(10));
    loop {
        tokio::select! {
            state = desired.message() => {
                let Some(state) = state? else { return Ok(()) };
                let now = OffsetDateTime::now_utc();
                let mut seen = received.lock().unwrap();
                for w in state.workloads {
                    seen.entry(w.workload_id).or_insert(now);
                }
            }
            _ = heartbeat.tick() => {
                let statuses = pb::AgentReport { report: Some(pb::agent_report::Report::Statuses(pb::WorkloadStatuses::default())) };
                tx.send(statuses).await?;
            }
        }
    }
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap_or("VmRSS: 0 kB");
    Ok(line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// The controller's CPU use over `over`, in percent of one core.
async fn cpu_percent(pid: u32, over: Duration) -> anyhow::Result<f64> {
    let ticks = || -> anyhow::Result<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        Ok(fields
            .get(11)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            + fields
                .get(12)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0))
    };
    let (before, started) = (ticks()?, Instant::now());
    tokio::time::sleep(over).await;
    let used = (ticks()? - before) as f64 / 100.0;
    Ok(used / started.elapsed().as_secs_f64() * 100.0)
}
