//! `einsora agent join`: enrols this machine, then says what it became.

use anyhow::Context;
use einsora_agent::join::{Join, join};
use einsora_runtime::settings::Settings;

pub fn run(settings: &Settings, token: String, controller: String) -> anyhow::Result<()> {
    let state_dir = einsora_agent::Config::from_settings(settings)?.state_dir;
    let request = Join {
        token,
        controller,
        state_dir,
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let joined = runtime.block_on(join(&request))?;
    println!(
        "joined as machine {} in region {}; its identity is in {}",
        joined.machine_id,
        joined.region,
        request.state_dir.display()
    );
    Ok(())
}
