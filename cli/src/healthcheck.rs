//! `einsora healthcheck <role>`: whether the role this environment's settings place answers
//! now (gRPC health over mutual TLS, as the role that calls it; a TCP connection for access
//! and the gateway), the probe `einsora up` waits on, once: a container's health check in a
//! Lab (compose/). A standby controller answers too: it serves, it just doesn't lead.

use std::time::Duration;

use anyhow::{Context, bail};
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::settings::Settings;

use crate::up::children::ChildRole;

/// How long one probe may take.
const WITHIN: Duration = Duration::from_secs(5);

/// A role a health check probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Checked {
    Api,
    Controller,
    Metering,
    Access,
    Gateway,
}

pub fn run(settings: &Settings, checked: Checked) -> anyhow::Result<()> {
    let (role, addr) = match checked {
        Checked::Api => (
            ChildRole::Api,
            einsora_api::Config::from_settings(settings)?.addr,
        ),
        Checked::Controller => (
            ChildRole::Controller,
            einsora_controller::Config::from_settings(settings)?.addr,
        ),
        Checked::Metering => (
            ChildRole::Metering,
            einsora_metering::Config::from_settings(settings)?.addr,
        ),
        Checked::Access => (
            ChildRole::Access,
            einsora_access::Config::from_settings(settings)?.addr,
        ),
        Checked::Gateway => (
            ChildRole::Gateway,
            einsora_gateway::Config::from_settings(settings)?.http_addr,
        ),
    };
    let caller = role.caller(&InternalTls::from_settings(settings)?)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let answered = runtime.block_on(async {
        tokio::time::timeout(WITHIN, ChildRole::answers(caller.as_ref(), addr)).await
    });
    match answered {
        Ok(true) => Ok(()),
        _ => bail!("{} at {addr} doesn't answer", role.name()),
    }
}
