//! Leading the region: stand by until the lease is ours, then reconcile every interval and at
//! once when the store signals a change, until shutdown (release the lease) or until the lease
//! is lost (stop at once, so the supervisor restarts this controller as a standby).

use std::sync::Arc;
use std::time::Duration;

use einsora_core::backend::Backend;
use einsora_runtime::shutdown::Shutdown;
use einsora_store::{Store, StoreError};

use crate::config::Config;
use crate::lease;
use crate::reconcile::Reconciler;
use crate::retention::{Kept, sweep};
use crate::writer::Fenced;

/// How soon a pass runs again while some workload is starting or stopping.
const BUSY_RECHECK: Duration = Duration::from_millis(500);

pub async fn lead(
    cfg: &Config,
    store: Arc<dyn Store>,
    backend: impl FnOnce() -> Arc<dyn Backend>,
    hub: Arc<crate::agents::Hub>,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    // The machines' view the reconciler acts on, with the agent backend.
    let agents = (cfg.backend == crate::config::BackendKind::Agent).then(|| Arc::clone(&hub));
    // A standby says so too: the region's gauges are read from the one leading.
    crate::metrics::leading(&cfg.region, false);
    let name = lease::name(&cfg.region);
    let holder = lease::holder();
    let Some(held) = lease::acquire(&*store, &name, &holder, cfg.timers, shutdown).await else {
        return Ok(());
    };
    hub.leading_from_now();
    let lost = Shutdown::new();
    let stop_renewing = Shutdown::new();
    let renewer = lease::keep(
        Arc::clone(&store),
        held.clone(),
        cfg.timers,
        lost.clone(),
        stop_renewing.clone(),
    );
    let mut reconciler = Reconciler {
        store: Arc::clone(&store),
        backend: backend(),
        catalog: Arc::clone(&cfg.catalog),
        region: cfg.region.clone(),
        timers: cfg.timers,
        writer: Fenced::new(Arc::clone(&store), held.clone()),
        agents: agents.clone(),
    };
    let stop_sweeping = Shutdown::new();
    let sweepers = [
        (Kept::Output, cfg.output_retention),
        (Kept::Activity, cfg.activity_retention),
    ]
    .map(|(kept, retention)| {
        let store = Arc::clone(&store);
        tokio::spawn(sweep(store, kept, retention, stop_sweeping.clone()))
    });
    let mut changes = store.changes();
    crate::metrics::leading(&cfg.region, true);
    let mut census_at: Option<std::time::Instant> = None;
    // A clean stop lets the pass in flight finish; a lost lease cancels it (its writes would be
    // refused anyway).
    while !shutdown.is_triggered() && !lost.is_triggered() {
        let started = std::time::Instant::now();
        let pass = tokio::select! {
            () = lost.cancelled() => break,
            pass = reconciler.pass() => pass,
        };
        tracing::debug!(took = ?started.elapsed(), "reconcile pass");
        crate::metrics::pass(&cfg.region, pass.is_ok(), started.elapsed());
        if census_at.is_none_or(|at| at.elapsed() >= crate::metrics::CENSUS_EVERY) {
            census_at = Some(std::time::Instant::now());
            if let Err(e) = crate::metrics::census(&*store, &cfg.region, agents.as_deref()).await {
                tracing::debug!(error = %e, "couldn't count the region's workloads for its metrics");
            }
        }
        let wait = match pass {
            Ok(outcome) if outcome.busy => cfg.timers.interval.min(BUSY_RECHECK),
            Ok(_) => cfg.timers.interval,
            Err(StoreError::LeaseLost(_)) => {
                lost.trigger();
                break;
            }
            Err(e) => {
                tracing::warn!(error = %e, "reconcile pass failed; retrying");
                cfg.timers.interval
            }
        };
        let reported = async {
            match &agents {
                Some(hub) => hub.reported().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = lost.cancelled() => {}
            _ = changes.changed() => {}
            () = reported => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
    crate::metrics::leading(&cfg.region, false);
    // Before the lease is let go: no agent's stream outlives this controller's leading.
    hub.stand_by();
    stop_renewing.trigger();
    stop_sweeping.trigger();
    let _ = renewer.await;
    for sweeper in sweepers {
        let _ = sweeper.await;
    }
    if lost.is_triggered() {
        anyhow::bail!("lost the lease {name}: stopping so this controller restarts as a standby");
    }
    if let Err(e) = store.release_lease(&held).await {
        tracing::warn!(error = %e, "couldn't release the lease; a standby takes over when it expires");
    }
    Ok(())
}
