//! The agent's side of Sync against a scripted fake controller: a real SyncService over mutual
//! TLS on loopback, answering each connection as its test says, and telling the test what the
//! agent sent and when. Real time, with the agent's own timers (its backoff from 0.5 s, its
//! status check every 2 s) and a heartbeat scaled down; bounds are generous, since tests share
//! two cores.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use einsora_proto::agent::v1::sync_service_server::{SyncService, SyncServiceServer};
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::pki::{Ca, Validity};
use tokio::time::Instant;
use tonic::{Request, Response, Status, Streaming};

use super::*;

/// Long enough for anything that should happen; it only runs out on a failure.
const PATIENCE: Duration = Duration::from_secs(20);

/// How the fake answers one connection.
enum Answer {
    Refuse(Code),
    /// As a controller standing by: UNAVAILABLE, marked so.
    Standby,
    Serve,
}

/// What the fake saw.
#[allow(clippy::large_enum_variant)] // a test's channel, a few messages: size doesn't matter
enum Seen {
    /// A stream opened with this client certificate (DER); desired states go down `desired`,
    /// and dropping it ends the stream.
    Connected {
        at: Instant,
        /// Which of the region's controllers (its place in the list).
        by: usize,
        cert: Vec<u8>,
        desired: mpsc::Sender<Result<pb::DesiredState, Status>>,
    },
    Refused {
        at: Instant,
        by: usize,
    },
    Report {
        at: Instant,
        report: pb::agent_report::Report,
    },
}

struct Fake {
    index: usize,
    script: Mutex<VecDeque<Answer>>,
    seen: mpsc::UnboundedSender<Seen>,
}

#[tonic::async_trait]
impl SyncService for Fake {
    type SyncStream = ReceiverStream<Result<pb::DesiredState, Status>>;

    async fn sync(
        &self,
        request: Request<Streaming<pb::AgentReport>>,
    ) -> Result<Response<Self::SyncStream>, Status> {
        let at = Instant::now();
        let answer = self.script.lock().unwrap().pop_front();
        let cert = request
            .peer_certs()
            .and_then(|c| c.first().map(|c| c.to_vec()))
            .unwrap_or_default();
        let by = self.index;
        match answer.unwrap_or(Answer::Refuse(Code::Unavailable)) {
            Answer::Refuse(code) => {
                let _ = self.seen.send(Seen::Refused { at, by });
                Err(Status::new(code, "scripted"))
            }
            Answer::Standby => {
                let _ = self.seen.send(Seen::Refused { at, by });
                Err(standby())
            }
            Answer::Serve => {
                let (desired, rx) = mpsc::channel(4);
                let _ = self.seen.send(Seen::Connected {
                    at,
                    by,
                    cert,
                    desired,
                });
                let mut reports = request.into_inner();
                let seen = self.seen.clone();
                tokio::spawn(async move {
                    while let Ok(Some(r)) = reports.message().await {
                        if let Some(report) = r.report {
                            let at = Instant::now();
                            let _ = seen.send(Seen::Report { at, report });
                        }
                    }
                });
                Ok(Response::new(ReceiverStream::new(rx)))
            }
        }
    }
}

/// What a controller standing by answers.
fn standby() -> Status {
    let mut status = Status::unavailable("scripted standby");
    status.metadata_mut().insert(
        metadata::ERROR,
        tonic::metadata::MetadataValue::from_static(metadata::STANDBY),
    );
    status
}

/// A region's fake controllers and a joined agent's state directory, the agent not started
/// yet.
struct Bench {
    seen: mpsc::UnboundedReceiver<Seen>,
    agents_ca: Ca,
    state: tempfile::TempDir,
    /// The region's controllers, in the order the agent is given them.
    controllers: Controllers,
    shutdown: Shutdown,
    _pki: tempfile::TempDir,
}

impl Drop for Bench {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

impl Bench {
    /// Answers connections by `script` (then refuses them), for an agent whose certificate is
    /// `validity`.
    async fn start(script: Vec<Answer>, validity: Validity) -> Bench {
        Bench::region(vec![script], validity).await
    }

    /// A controller per script, each answering by its own.
    async fn region(scripts: Vec<Vec<Answer>>, validity: Validity) -> Bench {
        let pki = tempfile::tempdir().unwrap();
        let settings = einsora_testkit::settings_in(pki.path(), &[]);
        let tls = InternalTls::from_settings(&settings).unwrap();
        tls.init().unwrap();
        let (config, ca_pem) = tls.agents_server(Role::Controller).unwrap();
        let agents_ca = tls.agents_ca().unwrap();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let shutdown = Shutdown::new();
        let mut addrs = Vec::new();
        for (index, script) in scripts.into_iter().enumerate() {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addrs.push(listener.local_addr().unwrap().to_string());
            let fake = Fake {
                index,
                script: Mutex::new(script.into()),
                seen: seen_tx.clone(),
            };
            let incoming = einsora_runtime::tls::incoming(listener, Arc::clone(&config));
            let stop = shutdown.clone();
            tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(SyncServiceServer::new(fake))
                    .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await }),
            );
        }
        let controllers = Controllers::parse(&addrs.join(",")).unwrap();
        let state = tempfile::tempdir().unwrap();
        let machine = *einsora_core::ids::MachineId::new().as_uuid();
        let (csr, key) = einsora_runtime::pki::csr().unwrap();
        let key = key.serialize_pem();
        let cert = agents_ca.sign_agent_csr(&csr, machine, validity).unwrap();
        for (name, text) in [
            ("machine-id", machine.to_string()),
            ("agent.pem", cert.cert_pem),
            ("agent.key", key),
            ("ca.pem", ca_pem),
            ("controller", addrs[0].clone()),
        ] {
            std::fs::write(state.path().join(name), text).unwrap();
        }
        Bench {
            seen,
            agents_ca,
            state,
            controllers,
            shutdown,
            _pki: pki,
        }
    }

    /// Runs the agent (with the sim driver) until it returns or the bench is dropped.
    fn agent(&self, heartbeat: Duration) -> tokio::task::JoinHandle<Result<(), SyncError>> {
        let (dir, controllers, shutdown) = (
            self.state.path().to_owned(),
            self.controllers.clone(),
            self.shutdown.clone(),
        );
        let timing = Timing {
            heartbeat,
            inventory_every: Duration::from_secs(3600),
            gpu_sample_every: Duration::from_secs(3600),
        };
        tokio::spawn(async move {
            let mut drivers = Drivers::start(&dir, None, None, None, None, true).await;
            let probe = crate::inventory::Probe::default();
            let link = Link {
                controllers: &controllers,
                timing,
                probe: &probe,
            };
            run(&dir, &link, &mut drivers, &shutdown).await
        })
    }

    async fn next(&mut self) -> Seen {
        match tokio::time::timeout(PATIENCE, self.seen.recv()).await {
            Ok(Some(seen)) => seen,
            _ => panic!("the agent did nothing within {PATIENCE:?}"),
        }
    }

    /// The next stream the agent opens (skipping reports of earlier ones).
    async fn connected(&mut self) -> (Vec<u8>, mpsc::Sender<Result<pb::DesiredState, Status>>) {
        loop {
            if let Seen::Connected { cert, desired, .. } = self.next().await {
                return (cert, desired);
            }
        }
    }
}

fn fresh() -> Validity {
    Validity::from_now(Duration::from_secs(3600))
}

/// Refused, it tries again after between half and all of its backoff, which doubles from
/// half a second; served, it sends its inventory first.
#[tokio::test]
async fn it_backs_off_doubling_with_jitter_then_syncs() {
    let refuse = || Answer::Refuse(Code::Unavailable);
    let mut bench = Bench::start(vec![refuse(), refuse(), refuse(), Answer::Serve], fresh()).await;
    let _agent = bench.agent(Duration::from_secs(60));
    let mut attempts = Vec::new();
    while attempts.len() < 4 {
        match bench.next().await {
            Seen::Refused { at, .. } | Seen::Connected { at, .. } => attempts.push(at),
            Seen::Report { .. } => {}
        }
    }
    let slack = Duration::from_millis(1500);
    for (i, backoff) in [500u64, 1000, 2000].into_iter().enumerate() {
        let gap = attempts[i + 1] - attempts[i];
        let backoff = Duration::from_millis(backoff);
        assert!(
            gap >= backoff / 2 && gap <= backoff + slack,
            "attempt {}: {gap:?} after the last, with a backoff of {backoff:?}",
            i + 2
        );
    }
    let Seen::Report { report, .. } = bench.next().await else {
        panic!("nothing after connecting");
    };
    assert!(matches!(report, pb::agent_report::Report::Inventory(_)));
}

/// Told the machine was revoked, the agent stops and never dials again.
#[tokio::test]
async fn a_revoked_machine_stops_and_never_dials_again() {
    let script = vec![Answer::Refuse(Code::PermissionDenied), Answer::Serve];
    let mut bench = Bench::start(script, fresh()).await;
    let agent = bench.agent(Duration::from_secs(60));
    assert!(matches!(bench.next().await, Seen::Refused { .. }));
    let result = tokio::time::timeout(PATIENCE, agent)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(SyncError::Revoked)), "{result:?}");
    let again = tokio::time::timeout(Duration::from_secs(2), bench.seen.recv()).await;
    assert!(again.is_err(), "dialled again after being revoked");
}

/// With nothing changing, it still sends its statuses every heartbeat: silence is what makes
/// a controller call a machine offline.
#[tokio::test]
async fn it_heartbeats_when_nothing_changes() {
    let mut bench = Bench::start(vec![Answer::Serve], fresh()).await;
    let heartbeat = Duration::from_millis(300);
    let _agent = bench.agent(heartbeat);
    let (_, _desired) = bench.connected().await;
    let mut statuses = Vec::new();
    while statuses.len() < 5 {
        if let Seen::Report {
            at,
            report: pb::agent_report::Report::Statuses(_),
        } = bench.next().await
        {
            statuses.push(at);
        }
    }
    for pair in statuses.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap <= heartbeat + Duration::from_millis(700),
            "{gap:?} of silence with a heartbeat of {heartbeat:?}"
        );
    }
}

/// Past half its certificate's lifetime, the agent asks for a new one; given it, it keeps it
/// and presents it from its next connection on.
#[tokio::test]
async fn it_renews_past_half_its_lifetime_and_reconnects_with_the_new_certificate() {
    let now = time::OffsetDateTime::now_utc();
    let old = Validity {
        not_before: now - Duration::from_secs(3 * 3600),
        not_after: now + Duration::from_secs(3600),
    };
    let mut bench = Bench::start(vec![Answer::Serve, Answer::Serve], old).await;
    let _agent = bench.agent(Duration::from_secs(60));
    let (first_cert, desired) = bench.connected().await;
    let csr = loop {
        if let Seen::Report {
            report: pb::agent_report::Report::RenewCertificate(r),
            ..
        } = bench.next().await
        {
            break r.csr_pem;
        }
    };
    let machine: einsora_core::ids::MachineId =
        std::fs::read_to_string(bench.state.path().join("machine-id"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
    let renewed = bench
        .agents_ca
        .sign_agent_csr(&csr, *machine.as_uuid(), fresh())
        .unwrap();
    let state = pb::DesiredState {
        renewed_certificate: Some(pb::RenewedCertificate {
            certificate_chain_pem: renewed.cert_pem.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    desired.send(Ok(state)).await.unwrap();
    // Its next statuses say it applied that state; then the controller ends the stream.
    loop {
        if let Seen::Report {
            report: pb::agent_report::Report::Statuses(_),
            ..
        } = bench.next().await
        {
            break;
        }
    }
    drop(desired);
    let (second_cert, _desired) = bench.connected().await;
    let (_, pem) = x509_parser::pem::parse_x509_pem(renewed.cert_pem.as_bytes()).unwrap();
    let renewed_der = pem.contents;
    assert_ne!(first_cert, second_cert);
    assert_eq!(
        second_cert, renewed_der,
        "the renewed certificate is presented"
    );
    let kept = std::fs::read_to_string(bench.state.path().join("agent.pem")).unwrap();
    assert_eq!(kept.trim(), renewed.cert_pem.trim());
}

/// Only the controller leading the region serves machines: refused by a standby, the agent
/// tries the next controller at once (backoff grows only after a whole round), and when the
/// one leading ends its stream standing by, it finds the new leader among the others.
#[tokio::test]
async fn it_moves_through_the_regions_controllers_to_the_one_leading() {
    let standby_then_leader = vec![Answer::Standby, Answer::Serve];
    let leader_then_standby = vec![Answer::Serve, Answer::Standby];
    let mut bench = Bench::region(vec![standby_then_leader, leader_then_standby], fresh()).await;
    let _agent = bench.agent(Duration::from_secs(60));
    let Seen::Refused { at: refused, by: 0 } = bench.next().await else {
        panic!("the first controller was dialled first");
    };
    let (at, by, desired) = loop {
        if let Seen::Connected {
            at, by, desired, ..
        } = bench.next().await
        {
            break (at, by, desired);
        }
    };
    assert_eq!(by, 1, "the next controller, the one leading");
    assert!(
        at - refused <= FIRST_BACKOFF + Duration::from_millis(700),
        "tried at once within the round: {:?}",
        at - refused
    );

    // The leader stands down: the stream ends so, and the agent looks for the new one.
    desired.send(Err(standby())).await.unwrap();
    loop {
        match bench.next().await {
            Seen::Connected { by, .. } => {
                assert_eq!(by, 0, "the controller leading now");
                break;
            }
            Seen::Refused { by, .. } => panic!("controller {by} refused it"),
            Seen::Report { .. } => {}
        }
    }
}
