//! An agents' port on 127.0.0.1 with its own PKI and store, and the agent's side of it.

use std::sync::Arc;
use std::time::Duration;

use einsora_core::ids::MachineId;
use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::enrolment_service_client::EnrolmentServiceClient;
use einsora_proto::agent::v1::sync_service_client::SyncServiceClient;
use einsora_runtime::pki::{IssuedCert, Role};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::tls::ClientTls;
use einsora_testkit::settings_in;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::agent_port::AgentPort;
use crate::agents::{Hub, Relays, StreamTimers};
use crate::config::Config;
use crate::testing::Tenancy;

/// Long enough for anything that should happen; it only runs out on a failure.
pub const PATIENCE: Duration = Duration::from_secs(10);

pub struct Port {
    pub addr: String,
    pub tenancy: Tenancy,
    pub hub: Arc<Hub>,
    pub relays: Arc<Relays>,
    ca_pem: String,
    shutdown: Shutdown,
    _pki: tempfile::TempDir,
}

impl Drop for Port {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

/// A machine's stream as its agent holds it.
pub struct Stream {
    pub reports: mpsc::Sender<pb::AgentReport>,
    pub desired: Streaming<pb::DesiredState>,
}

impl Port {
    /// With these settings on top of the defaults.
    pub async fn start(settings: &[(&str, &str)]) -> Port {
        Port::with_timers(settings, StreamTimers::default()).await
    }

    /// With these settings, and each stream's timers scaled to `stream`.
    pub async fn with_timers(settings: &[(&str, &str)], stream: StreamTimers) -> Port {
        let pki = tempfile::tempdir().unwrap();
        let mut all = settings_in(pki.path(), &[("EINSORA_AGENT_ADDR", "127.0.0.1:0")]);
        for (name, value) in settings {
            all = all.with(name, *value);
        }
        let mut cfg = Config::from_settings(&all).unwrap();
        cfg.timers.stream = stream;
        cfg.tls.init().unwrap();
        let ca_pem = std::fs::read_to_string(pki.path().join("pki/ca.pem")).unwrap();
        let tenancy = Tenancy::new().await;
        let shutdown = Shutdown::new();
        let hub = Arc::new(Hub::new(Duration::from_secs(60)));
        // It leads its region: a standby serves no machine (`tests/leading.rs`).
        hub.leading_from_now();
        let store = Arc::clone(&tenancy.store);
        let relays = Arc::new(Relays::default());
        let port = AgentPort::bind(
            &cfg,
            store,
            Arc::clone(&hub),
            Arc::clone(&relays),
            &shutdown,
        )
        .await
        .unwrap();
        let addr = port.local_addr().unwrap().to_string();
        tokio::spawn(port.serve(shutdown.clone()));
        Port {
            addr,
            tenancy,
            hub,
            relays,
            ca_pem,
            shutdown,
            _pki: pki,
        }
    }

    /// Enrols with `token` as `agent join` does: the machine and its certificate with key.
    pub async fn enrol(&self, token: &str) -> Result<(MachineId, IssuedCert), Status> {
        let tls = ClientTls::new(&self.ca_pem, None, Role::Controller).unwrap();
        let channel = tls.connect(&self.addr).await.unwrap();
        let (csr_pem, key) = einsora_runtime::pki::csr().unwrap();
        let answer = EnrolmentServiceClient::new(channel)
            .enroll(pb::EnrollRequest {
                enrolment_token: token.to_owned(),
                csr_pem,
                hostname: "lab-box".into(),
            })
            .await?
            .into_inner();
        let machine = answer.machine_id.parse().unwrap();
        let cert = IssuedCert {
            cert_pem: answer.certificate_chain_pem,
            key_pem: key.serialize_pem(),
        };
        Ok((machine, cert))
    }

    /// A channel to the port with `cert`, as an agent's connection.
    pub async fn channel(&self, cert: &IssuedCert) -> tonic::transport::Channel {
        let tls = ClientTls::new(&self.ca_pem, Some(cert), Role::Controller).unwrap();
        tls.connect(&self.addr).await.unwrap()
    }

    /// Opens a Sync stream with `cert` and waits for the first desired state.
    pub async fn sync(&self, cert: &IssuedCert) -> Result<Stream, Status> {
        self.sync_with_window(cert, None).await
    }

    /// As `sync`, with room for `window` bytes of desired state the agent hasn't read.
    pub async fn sync_with_window(
        &self,
        cert: &IssuedCert,
        window: Option<u32>,
    ) -> Result<Stream, Status> {
        let tls = ClientTls::new(&self.ca_pem, Some(cert), Role::Controller).unwrap();
        let channel = tls
            .connect_tuned(&self.addr, |e| e.initial_stream_window_size(window))
            .await
            .unwrap();
        let (reports, rx) = mpsc::channel(16);
        let desired = SyncServiceClient::new(channel)
            .sync(ReceiverStream::new(rx))
            .await?
            .into_inner();
        let mut stream = Stream { reports, desired };
        stream.next().await?;
        Ok(stream)
    }
}

impl Stream {
    /// The next desired state; `Err` when the controller ends the stream (a plain end reads
    /// as `Err` with code `Ok`).
    pub async fn next(&mut self) -> Result<pb::DesiredState, Status> {
        match tokio::time::timeout(PATIENCE, self.desired.message()).await {
            Ok(Ok(Some(state))) => Ok(state),
            Ok(Ok(None)) => Err(Status::ok("the stream ended")),
            Ok(Err(status)) => Err(status),
            Err(_) => panic!("no desired state within {PATIENCE:?}"),
        }
    }

    pub async fn send(&self, report: pb::agent_report::Report) {
        let report = pb::AgentReport {
            report: Some(report),
        };
        self.reports.send(report).await.unwrap();
    }

    /// Whether the stream stays open, with nothing sent, for `quiet`.
    pub async fn stays_open(&mut self, quiet: Duration) -> bool {
        tokio::time::timeout(quiet, self.desired.message())
            .await
            .is_err()
    }
}
