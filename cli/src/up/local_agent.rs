//! The machine `einsora up` runs on, as a node agent: enrolled on the first start exactly as a
//! remote machine joins (a one-time token, `Enroll` over server-authenticated TLS pinned to
//! the installation CA), then supervised like every other role.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use einsora_agent::join::{Join, JoinError, join};
use einsora_api::enrolment::local_machine_token;
use einsora_api::setup::AuthMode;
use einsora_core::region::Region;
use einsora_runtime::grpc::InternalTls;
use einsora_store::DatabaseUrl;

use super::plan::{MACHINE_OWNER, Plan};

const RETRY: Duration = Duration::from_millis(100);
/// In dev auth mode the api seeds the owner's tenant as it starts (a local owner exists before
/// `up` starts anything).
const OWNER_WAIT: Duration = Duration::from_secs(20);

/// Where the local agent keeps its identity, and how it reaches the controller.
#[derive(Debug, Clone)]
pub struct LocalAgent {
    pub state_dir: PathBuf,
    /// The controller's agents' port as this machine dials it.
    pub controller: String,
    pub region: Region,
    /// The slug of the tenant that owns this machine.
    pub owner: String,
}

/// Enrols this machine unless it already is; retries while the controller or (in dev mode)
/// the owner's account are not there yet. The caller bounds how long.
pub async fn ensure_joined(
    plan: &Plan,
    agent: &LocalAgent,
    tls: &InternalTls,
) -> anyhow::Result<()> {
    if agent.state_dir.join("machine-id").exists() {
        return Ok(());
    }
    let token = token(plan, agent, tls).await?;
    let request = Join {
        token,
        controller: agent.controller.clone(),
        state_dir: agent.state_dir.clone(),
    };
    loop {
        match join(&request).await {
            Ok(joined) => {
                tracing::info!(machine = %joined.machine_id, region = %joined.region, "this machine joined");
                return Ok(());
            }
            Err(JoinError::Unreachable { .. }) => tokio::time::sleep(RETRY).await,
            Err(err) => return Err(anyhow!(err).context("enrolling this machine")),
        }
    }
}

async fn token(plan: &Plan, agent: &LocalAgent, tls: &InternalTls) -> anyhow::Result<String> {
    let store = einsora_store::open(&DatabaseUrl::from_settings(&plan.settings)?).await?;
    let fingerprint = tls.ca_fingerprint()?;
    let wait = match plan.auth_mode {
        AuthMode::Dev => OWNER_WAIT,
        AuthMode::Local => Duration::ZERO,
    };
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let minted = local_machine_token(&*store, &agent.owner, agent.region.clone(), fingerprint)
            .await
            .context("making this machine's enrolment token")?;
        match minted {
            Some(token) => return Ok(token),
            None if tokio::time::Instant::now() < deadline => tokio::time::sleep(RETRY).await,
            None => bail!(
                "{MACHINE_OWNER}: there is no tenant `{}` with an account to own this machine",
                agent.owner
            ),
        }
    }
}
