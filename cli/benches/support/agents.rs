//! Playing machines at the agents' port, as the hollow and the flooding agents do: enrolment
//! tokens made through the store, and connections from any loopback address (the port counts
//! its limits per address, so each machine a bench plays can come from its own, as real ones
//! would).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use einsora_core::ids::{EnrolmentTokenId, MachineId, TenantId, UserId};
use einsora_core::region::Region;
use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::enrolment_service_client::EnrolmentServiceClient;
use einsora_proto::agent::v1::sync_service_client::SyncServiceClient;
use einsora_runtime::pki::{Role, fingerprint};
use einsora_store::{NewEnrolmentToken, NewTenant, NewUser, QuotaClass, Store, secret_hash};
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// A TCP connect, a TLS handshake, an Enroll: each given this long.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A machine's identity after enrolment.
#[derive(Debug, Clone)]
pub struct Enrolled {
    pub id: MachineId,
    pub cert_pem: String,
    pub key_pem: String,
}

/// The agents' port of one installation, trusted through its CA.
pub struct AgentsPort {
    pub addr: SocketAddr,
    ca_pem: String,
}

impl AgentsPort {
    pub fn new(addr: SocketAddr, ca_pem: String) -> AgentsPort {
        AgentsPort { addr, ca_pem }
    }

    /// The port, reached from `from`, expecting the controller's role (as an agent does after
    /// enrolment), presenting `own` if any.
    fn endpoint(&self, from: IpAddr, own: Option<&Enrolled>) -> anyhow::Result<Endpoint> {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .domain_name(Role::Controller.name())
            .timeout(PATIENCE);
        if let Some(own) = own {
            tls = tls.identity(Identity::from_pem(&own.cert_pem, &own.key_pem));
        }
        Ok(Endpoint::from_shared(format!("https://{}", self.addr))?
            .tls_config(tls)?
            .local_address(Some(from))
            .connect_timeout(PATIENCE))
    }

    /// Connects now (TCP, TLS, HTTP/2), within `PATIENCE`.
    pub async fn connect(&self, from: IpAddr, own: Option<&Enrolled>) -> anyhow::Result<Channel> {
        let endpoint = self.endpoint(from, own)?;
        Ok(tokio::time::timeout(PATIENCE, endpoint.connect())
            .await
            .context("connecting timed out")??)
    }

    /// Opens `machine`'s Sync stream from `from` and sends `inventory` first, as an agent does:
    /// the sender for its next reports (`buffer` of them queued) and its desired states.
    pub async fn open_stream(
        &self,
        from: IpAddr,
        machine: &Enrolled,
        inventory: pb::Inventory,
        buffer: usize,
    ) -> anyhow::Result<(
        mpsc::Sender<pb::AgentReport>,
        tonic::Streaming<pb::DesiredState>,
    )> {
        let channel = self.connect(from, Some(machine)).await?;
        let (tx, rx) = mpsc::channel(buffer);
        tx.send(pb::AgentReport {
            report: Some(pb::agent_report::Report::Inventory(inventory)),
        })
        .await?;
        let mut client = SyncServiceClient::new(channel);
        let call = client.sync(ReceiverStream::new(rx));
        let desired = tokio::time::timeout(PATIENCE, call).await??.into_inner();
        Ok((tx, desired))
    }

    /// Enrols a new machine from `from` with `token` and a fresh key.
    pub async fn enrol(
        &self,
        from: IpAddr,
        token: String,
        hostname: &str,
    ) -> anyhow::Result<Enrolled> {
        let (csr_pem, key) = einsora_runtime::pki::csr()?;
        let channel = self.connect(from, None).await?;
        let request = pb::EnrollRequest {
            enrolment_token: token,
            csr_pem,
            hostname: hostname.to_owned(),
        };
        let enrolled = tokio::time::timeout(
            PATIENCE,
            EnrolmentServiceClient::new(channel).enroll(request),
        )
        .await
        .context("Enroll timed out")??
        .into_inner();
        Ok(Enrolled {
            id: enrolled.machine_id.parse().context("a machine ID")?,
            cert_pem: enrolled.certificate_chain_pem,
            key_pem: key.serialize_pem(),
        })
    }
}

/// A hollow machine's inventory: Linux, no devices, the `sim` driver.
pub fn inventory(hostname: &str, cpus: u32, memory_bytes: u64) -> pb::Inventory {
    pb::Inventory {
        hostname: hostname.to_owned(),
        os: "linux".into(),
        arch: "x86_64".into(),
        cpus,
        memory_bytes,
        devices: vec![],
        drivers: vec!["sim".into()],
        agent_version: "bench".into(),
        models: vec![],
        gpu_note: String::new(),
        vm: None,
        cores: None,
    }
}

/// The machines' owner: a trusted tenant `slug` with no quota limit, and a user of it who makes
/// the enrolment tokens.
pub async fn owner(store: &dyn Store, slug: &str) -> anyhow::Result<(TenantId, UserId)> {
    let tenant = TenantId::new();
    let new = NewTenant {
        id: tenant,
        slug: slug.to_owned(),
        name: "Bench owner".into(),
        trusted: true,
    };
    store.create_tenant(&new).await?;
    store.set_quota(tenant, &QuotaClass::Default, None).await?;
    let user = UserId::new();
    let you = NewUser {
        role: einsora_core::role::Role::Owner,
        id: user,
        tenant_id: tenant,
        email: format!("owner@{slug}.bench"),
        display_name: "Owner".into(),
        phc: "$argon2id$unused".into(),
    };
    store.create_user(&you).await?;
    Ok((tenant, user))
}

/// `n` enrolment tokens of `tenant`, made by `user`, valid for two hours and pinned to the
/// installation's CA (`ca_pem`); `label` (five letters) tells the benches' tokens apart.
pub async fn enrolment_tokens(
    store: &dyn Store,
    (tenant, user): (TenantId, UserId),
    ca_pem: &str,
    n: usize,
    label: &str,
) -> anyhow::Result<Vec<String>> {
    let pin_hex: String = fingerprint(ca_pem)?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let width = 32usize.saturating_sub(label.len());
    let mut tokens = Vec::with_capacity(n);
    for i in 0..n {
        let token = format!("enr_{label}{i:0width$}.{pin_hex}");
        store
            .create_enrolment_token(&NewEnrolmentToken {
                id: EnrolmentTokenId::new(),
                tenant_id: tenant,
                name: format!("{label}-{i}"),
                region: Region::new("local")?,
                prefix: token.chars().take(8).collect(),
                token_hash: secret_hash(&token),
                created_by: user,
                expires_at: OffsetDateTime::now_utc() + time::Duration::hours(2),
            })
            .await?;
        tokens.push(token);
    }
    Ok(tokens)
}
