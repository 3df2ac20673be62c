//! Ending notebook sessions once what they stood on is gone, within seconds, whether or not
//! their browser sends anything: every second, the grants behind the open sessions are asked
//! of the api (a logout, a password change or reset, a revoked or expired token ends them) and
//! each session's workload of the controller (stopped, restarted or gone ends it). An ended
//! session's WebSockets and streamed answers close at once (`session.rs`). A lookup that fails
//! (the api or controller unavailable) ends nothing: the next sweep asks again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::app::Proxy;
use crate::errors::RequestId;
use crate::session::Session;
use crate::upstream::LookupError;

/// How often sessions are checked.
pub(crate) const EVERY: Duration = Duration::from_secs(1);

pub(crate) async fn run(proxy: Arc<Proxy>) {
    let stop = proxy.shutdown.cancelled();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(EVERY) => {}
        }
        once(&proxy).await;
    }
}

async fn once(proxy: &Proxy) {
    // Connections to workloads idle too long go too (`kept`), sessions or not.
    proxy.upstream.kept.sweep();
    let open = proxy.sessions.snapshot();
    if open.is_empty() {
        return;
    }
    let asked: HashSet<String> = open.iter().map(|s| s.grant.clone()).collect();
    match proxy
        .upstream
        .live_grants(asked.iter().cloned().collect())
        .await
    {
        Ok(live) => {
            // Only grants asked about: a session opened since the snapshot waits its turn.
            let gone = |s: &Session| asked.contains(&s.grant) && !live.contains(&s.grant);
            let ended = proxy.sessions.end_where(gone);
            if ended > 0 {
                tracing::info!(
                    ended,
                    "notebook sessions ended: the credential that opened them ended"
                );
            }
        }
        Err(e) => log_unavailable("api", &e),
    }
    // The attempt running now of each workload with a session; `None` if it isn't running.
    let mut running: HashMap<(Uuid, String), Option<u32>> = HashMap::new();
    for s in &open {
        let key = (s.workload, s.tenant_id.clone());
        if running.contains_key(&key) {
            continue;
        }
        let id = RequestId::new();
        match proxy
            .targets
            .resolve(&proxy.upstream, s.workload, &s.tenant_id, &id)
            .await
        {
            Ok(target) => running.insert(key, Some(target.attempt)),
            Err(LookupError::Refused | LookupError::Unreachable(_)) => running.insert(key, None),
            Err(e) => {
                log_unavailable("controller", &e);
                continue;
            }
        };
    }
    let ended = proxy.sessions.end_where(|s| {
        running
            .get(&(s.workload, s.tenant_id.clone()))
            .is_some_and(|now| *now != Some(s.attempt))
    });
    if ended > 0 {
        tracing::info!(
            ended,
            "notebook sessions ended: their workload stopped or restarted"
        );
    }
}

fn log_unavailable(service: &'static str, e: &LookupError) {
    if let LookupError::Unavailable(status) = e {
        tracing::debug!(service, code = ?status.code(), "couldn't check sessions this time");
    }
}
