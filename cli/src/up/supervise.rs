//! Keeping every role running: start them all, wait until each answers, restart one that exits
//! (after a backoff that grows while it keeps failing), and on shutdown stop them all: first
//! the roles that call the others while they stop (`ChildRole::stops_first`: the access proxy
//! sends its last token counts to the api), then the rest.
//!
//! A role that stops before it was ever ready fails the whole start: that is a setting, a
//! port or a database to fix, not something a restart mends.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::metrics::METRICS_ADDR;
use einsora_runtime::shutdown::Shutdown;
use tokio::sync::mpsc;

use super::children::ChildRole;
use super::plan::Plan;
use super::{logs, metrics};

/// How long the roles have, together, to answer for the first time.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Low enough that a role which stopped during a database outage (the controller gives up its
/// lease) is back within seconds of the database's return.
const MAX_BACKOFF: Duration = Duration::from_secs(4);
/// A role that ran this long before exiting starts again from the first backoff.
const STEADY: Duration = Duration::from_secs(60);

/// What a keeper tells the supervisor while the installation starts.
#[derive(Debug)]
enum Started {
    Ready(ChildRole),
    Failed(ChildRole, anyhow::Error),
}

/// Runs until `shutdown`; an error if the roles could not all start.
pub async fn run(plan: Arc<Plan>, tls: InternalTls, shutdown: Shutdown) -> anyhow::Result<()> {
    let begun = Instant::now();
    let exe = Arc::new(std::env::current_exe().context("finding the einsora binary")?);
    let listener = einsora_runtime::grpc::bind(METRICS_ADDR, plan.metrics_addr).await?;
    let metrics_url = format!("http://{}/metrics", listener.local_addr()?);
    tracing::info!(%metrics_url, "serving the installation's metrics");
    let roles_metrics = plan.role_metrics.clone();
    tokio::spawn(metrics::serve(listener, roles_metrics, shutdown.clone()));
    let (started, mut reports) = mpsc::unbounded_channel();
    let roles = plan.roles();
    // Stopped once the roles that stop first have.
    let after = Shutdown::new();
    let (mut first, mut then) = (Vec::new(), Vec::new());
    for role in roles.iter().copied() {
        let keeper = Keeper {
            role,
            plan: Arc::clone(&plan),
            tls: tls.clone(),
            exe: Arc::clone(&exe),
            started: started.clone(),
            shutdown: if role.stops_first() {
                shutdown.clone()
            } else {
                after.clone()
            },
        };
        let kept = tokio::spawn(keeper.keep());
        if role.stops_first() {
            first.push(kept);
        } else {
            then.push(kept);
        }
    }
    drop(started);

    let mut waiting = roles;
    let deadline = tokio::time::sleep(START_TIMEOUT);
    tokio::pin!(deadline);
    let outcome = loop {
        if waiting.is_empty() {
            break Ok(());
        }
        tokio::select! {
            report = reports.recv() => match report {
                Some(Started::Ready(role)) => waiting.retain(|r| *r != role),
                Some(Started::Failed(role, err)) => break Err(err.context(role.name())),
                None => break Err(anyhow!("every role stopped while starting")),
            },
            () = shutdown.cancelled() => break Ok(()),
            () = &mut deadline => {
                let names: Vec<_> = waiting.iter().map(|r| r.name()).collect();
                break Err(anyhow!(
                    "{} did not answer within {START_TIMEOUT:?} (einsora.log says why)",
                    names.join(", ")
                ));
            }
        }
    };
    if outcome.is_ok() && !shutdown.is_triggered() {
        let url = plan.dashboard_url();
        let ms = begun.elapsed().as_millis();
        tracing::info!(%url, ms, "einsora is ready");
        // A closed standard output is no reason to stop.
        let _ = writeln!(
            std::io::stdout(),
            "Einsora is ready: {url} (Ctrl-C stops it)"
        );
        shutdown.cancelled().await;
    }
    shutdown.trigger();
    for keeper in first {
        let _ = keeper.await;
    }
    after.trigger();
    for keeper in then {
        let _ = keeper.await;
    }
    outcome
}

struct Keeper {
    role: ChildRole,
    plan: Arc<Plan>,
    tls: InternalTls,
    exe: Arc<PathBuf>,
    started: mpsc::UnboundedSender<Started>,
    shutdown: Shutdown,
}

impl Keeper {
    /// Starts the role, and again each time it exits, until shutdown.
    async fn keep(self) {
        let name = self.role.name();
        let mut backoff = FIRST_BACKOFF;
        let mut ever_ready = false;
        loop {
            let began = Instant::now();
            let ended = match self.run_once(&mut ever_ready).await {
                Ok(Some(ended)) => ended,
                Ok(None) => return,
                Err(err) if !ever_ready => {
                    let _ = self.started.send(Started::Failed(self.role, err));
                    return;
                }
                Err(err) => format!("{err:#}"),
            };
            if began.elapsed() >= STEADY {
                backoff = FIRST_BACKOFF;
            }
            tracing::warn!(child = name, %ended, ?backoff, "stopped unexpectedly; restarting");
            metrics::restarted(name);
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.shutdown.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One life of the child: `Ok(None)` when it was stopped for shutdown, `Ok(Some(why))` when
    /// it exited after being ready, `Err` when it could not start or exited before it was.
    async fn run_once(&self, ever_ready: &mut bool) -> anyhow::Result<Option<String>> {
        let (role, grace) = (self.role, self.plan.stop_grace);
        tokio::select! {
            prepared = role.prepare(&self.plan, &self.tls) => prepared?,
            () = self.shutdown.cancelled() => return Ok(None),
        }
        let mut child = role
            .spawn(&self.plan, &self.exe)
            .context("starting the process")?;
        let pid = child.id();
        let last_line = logs::forward(role.name(), child.stderr.take());
        let ready = async {
            role.ready(&self.plan, &self.tls).await?;
            tracing::info!(child = role.name(), pid, "ready");
            if !*ever_ready {
                *ever_ready = true;
                let _ = self.started.send(Started::Ready(role));
            }
            std::future::pending::<anyhow::Result<()>>().await
        };
        let status = tokio::select! {
            status = child.wait() => status.context("waiting for the process")?,
            Err(err) = ready => {
                role.stop(&mut child, grace).await;
                return Err(err);
            }
            () = self.shutdown.cancelled() => {
                role.stop(&mut child, grace).await;
                return Ok(None);
            }
        };
        let last_line = last_line.await.ok().flatten();
        let why = describe(status, last_line.as_deref());
        if *ever_ready {
            Ok(Some(why))
        } else {
            Err(anyhow!("stopped while starting ({why})"))
        }
    }
}

/// `exit status: 1: einsora: EINSORA_API_ADDR: …`: the status, and for a process that exited
/// by itself its last line, which says why (a signal's victim had no last word).
fn describe(status: ExitStatus, last_line: Option<&str>) -> String {
    match last_line.map(str::trim) {
        Some(line) if status.code().is_some() && !line.is_empty() => format!("{status}: {line}"),
        _ => status.to_string(),
    }
}
