//! The region lease (seeds: "Two controllers for one region"): one controller per region
//! reconciles. A standby retries every interval; the leader renews in the background every third
//! of the lease, so a long pass never lets it lapse, and gives up (so its supervisor restarts it
//! as a standby) once another holds it or renewing failed for two thirds of its time.

use std::sync::Arc;

use einsora_runtime::shutdown::Shutdown;
use einsora_store::{Lease, Store, StoreError};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::Timers;

pub fn name(region: &einsora_core::region::Region) -> String {
    region.controller_lease()
}

/// Who this process is, in the lease table: new for every process, so a restarted controller
/// never mistakes a lease its predecessor held for its own.
pub fn holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}/{}/{}", std::process::id(), uuid::Uuid::now_v7())
}

/// Waits until the lease is this process's, or `None` once `shutdown` fires first.
pub async fn acquire(
    store: &dyn Store,
    name: &str,
    holder: &str,
    timers: Timers,
    shutdown: &Shutdown,
) -> Option<Lease> {
    let mut said_standby = false;
    loop {
        match store.take_lease(name, holder, timers.lease).await {
            Ok(Some(lease)) => {
                tracing::info!(lease = name, epoch = lease.epoch, "leading");
                return Some(lease);
            }
            Ok(None) if !said_standby => {
                tracing::info!(lease = name, "another controller leads; standing by");
                said_standby = true;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "couldn't take the lease; retrying"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(timers.interval) => {}
        }
    }
}

/// Keeps the lease renewed until `stop` fires; triggers `lost` once another holds it, or when
/// it couldn't be renewed for two thirds of its time (a deadline, however the attempts went).
pub fn keep(
    store: Arc<dyn Store>,
    lease: Lease,
    timers: Timers,
    lost: Shutdown,
    stop: Shutdown,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut give_up = Instant::now() + timers.give_up_after();
        loop {
            let next = Instant::now() + timers.renew_every();
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(next.min(give_up)) => {}
            }
            if Instant::now() >= give_up {
                break;
            }
            let attempt = tokio::time::timeout_at(give_up, store.renew_lease(&lease, timers.lease));
            match attempt.await {
                Ok(Ok(_)) => give_up = Instant::now() + timers.give_up_after(),
                Ok(Err(StoreError::LeaseLost(_))) => {
                    tracing::error!(lease = %lease.name, "another controller took the lease");
                    lost.trigger();
                    return;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "couldn't renew the lease"),
                Err(_) => {}
            }
        }
        tracing::error!(lease = %lease.name, "couldn't renew the lease in time");
        lost.trigger();
    })
}
