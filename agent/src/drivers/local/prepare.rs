//! A workload's places made before its server starts: its notebook's disk, its run directory
//! (no stale socket left in it), its token (a fresh one, the agent's own copy kept in its
//! secret directory), its endpoint's model.

use std::collections::HashMap;
use std::path::Path;

use einsora_core::agent::StatusCode;
use einsora_proto::convert::PlacedSpec;

use super::Wanted;
use super::contract::Serves;
use super::dirs::{self, Places};
use super::disk::Disks;
use super::records::Record;

/// What a workload's start is prepared from.
#[derive(Debug, Clone, Copy)]
pub struct Preparation<'a> {
    pub disks: &'a Disks,
    pub models_dir: Option<&'a Path>,
    /// The user its server runs as, who is given its places.
    pub user: (u32, u32),
    pub places: &'a Places,
    pub serves: &'a Serves,
    /// What the driver recorded of it before.
    pub record: &'a Record,
}

/// Attempts that couldn't be admitted or prepared, and why: not tried again (a large model
/// isn't copied again every second). A new attempt tries afresh.
#[derive(Debug, Default)]
pub struct Unprepared(HashMap<String, (u32, StatusCode)>);

impl Unprepared {
    fn earlier(&self, w: &Wanted) -> Result<(), StatusCode> {
        match self.0.get(&w.workload) {
            Some(&(attempt, code)) if attempt == w.attempt => Err(code),
            _ => Ok(()),
        }
    }

    fn remember(&mut self, w: &Wanted, code: StatusCode) {
        self.0.insert(w.workload.clone(), (w.attempt, code));
    }

    /// Whether new work may start (the free-space floor, the disk-limit setting): decided once
    /// per attempt.
    pub fn admit(&mut self, disks: &Disks, w: &Wanted) -> Result<(), StatusCode> {
        self.earlier(w)?;
        disks
            .admit(&w.workload)
            .inspect_err(|&code| self.remember(w, code))
    }

    /// Its places made, once per attempt, and the record of its start (its fresh token, the
    /// sandbox's `fingerprint` where the driver keeps it there), to be saved before it starts.
    pub async fn prepare(
        &mut self,
        p: Preparation<'_>,
        w: &Wanted,
        fingerprint: Option<String>,
    ) -> Result<Record, StatusCode> {
        self.earlier(w)?;
        match prepare(&p, w).await {
            Ok(token) => Ok(Record {
                started_attempt: w.attempt,
                had_disk: p.record.had_disk || matches!(p.serves, Serves::Notebook { .. }),
                token: Some(token),
                fingerprint,
            }),
            Err(code) => {
                self.remember(w, code);
                Err(code)
            }
        }
    }
}

/// The token its server is started with, or why it can't start (the reason in the log).
async fn prepare(p: &Preparation<'_>, w: &Wanted) -> Result<String, StatusCode> {
    let Preparation {
        disks,
        models_dir,
        user,
        places,
        serves,
        record,
    } = *p;
    let failed = |e: std::io::Error| {
        tracing::warn!(workload = %w.workload, error = %e, "can't prepare its directories");
        StatusCode::StartFailed
    };
    if let Serves::Notebook { data } = serves {
        let bytes = disk_bytes(&w.spec);
        disks
            .provide_data(&w.workload, data, bytes, user, record.had_disk)
            .await?;
    }
    disks.provide_run_dir(&w.workload, &places.run, user)?;
    // A stale socket from an earlier run would look ready.
    let _ = std::fs::remove_file(places.run.join(serves.socket_name()));
    dirs::agent_dir(&places.secret).map_err(failed)?;
    let token = dirs::new_token().map_err(failed)?;
    dirs::secret_file(&places.secret.join(serves.token_name()), &token, user).map_err(failed)?;
    if let Serves::Endpoint { server, .. } = serves {
        super::model::prepare(&w.spec, *server, models_dir, &places.model, user).await?;
    }
    Ok(token)
}

/// The size limit of a notebook's files: its class's, or the catalog's default from a
/// controller that doesn't say.
fn disk_bytes(spec: &PlacedSpec) -> u64 {
    let said = spec.resources.as_ref().map_or(0, |r| r.disk_bytes);
    if said > 0 {
        return said;
    }
    u64::from(einsora_core::catalog::DEFAULT_DISK_GIB) << 30
}
