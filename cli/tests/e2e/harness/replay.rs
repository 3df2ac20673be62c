//! The offline checker of crash tests: replays every workload's timeline against the state
//! machine. It finds illegal edges (a step repeated is one: it starts from the wrong state),
//! notes repeated with nothing between them, acknowledged actions missing from the timeline,
//! and rows that differ from their last event.

use einsora_core::lifecycle::{self, State};
use einsora_store::{DatabaseUrl, WorkloadFilter};

/// A user action the API acknowledged (202): the workload and the state it answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    pub workload: String,
    pub state: State,
    /// The start of the reason its timeline row has ("stop requested by", "created by").
    pub reason: &'static str,
}

#[derive(Debug, Default)]
pub struct Findings {
    pub workloads: usize,
    pub events: usize,
    pub illegal: Vec<String>,
    pub duplicates: Vec<String>,
    pub missing: Vec<String>,
    pub rows_differ: Vec<String>,
}

impl Findings {
    pub fn clean(&self) -> bool {
        self.illegal.is_empty()
            && self.duplicates.is_empty()
            && self.missing.is_empty()
            && self.rows_differ.is_empty()
    }
}

pub async fn check(database: &str, acknowledged: &[Acknowledged]) -> Findings {
    let url = DatabaseUrl::parse(database).unwrap();
    let store = einsora_store::open(&url).await.unwrap();
    let all = store
        .workloads(&WorkloadFilter {
            include_deleted: true,
            ..WorkloadFilter::default()
        })
        .await
        .unwrap();
    let mut findings = Findings {
        workloads: all.len(),
        ..Findings::default()
    };
    for w in &all {
        let events = store.events(w.id).await.unwrap();
        findings.events += events.len();
        let id = w.id.to_string();
        let mut current: Option<State> = None;
        let mut last_note: Option<&str> = None;
        for e in &events {
            if e.is_note() {
                if Some(e.to) != current {
                    findings
                        .illegal
                        .push(format!("{id}: a note on {} while {current:?}", e.to));
                }
                if last_note == Some(e.reason.as_str()) {
                    findings
                        .duplicates
                        .push(format!("{id}: {:?} noted twice in a row", e.reason));
                }
                last_note = Some(&e.reason);
                continue;
            }
            last_note = None;
            let legal = match (current, e.from) {
                (None, None) => e.to == State::INITIAL,
                (Some(now), Some(from)) => {
                    from == now && lifecycle::transition(from, e.to, true).is_ok()
                }
                _ => false,
            };
            if !legal {
                findings
                    .illegal
                    .push(format!("{id}: {:?} → {} while {current:?}", e.from, e.to));
            }
            current = Some(e.to);
        }
        let last = events.iter().rev().find(|e| !e.is_note());
        match last {
            Some(e) if e.to == w.state && e.reason == w.reason && e.attempt == w.attempt => {}
            _ => findings.rows_differ.push(format!(
                "{id}: row {} ({:?}) vs last event {:?}",
                w.state,
                w.reason,
                last.map(|e| (e.to, &e.reason))
            )),
        }
        let expected: Vec<_> = acknowledged.iter().filter(|a| a.workload == id).collect();
        let mut kinds: Vec<(State, &str)> = Vec::new();
        for a in &expected {
            if !kinds.contains(&(a.state, a.reason)) {
                kinds.push((a.state, a.reason));
            }
        }
        for (state, reason) in kinds {
            let acked = expected
                .iter()
                .filter(|a| a.state == state && a.reason == reason)
                .count();
            let recorded = events
                .iter()
                .filter(|e| !e.is_note() && e.to == state && e.reason.starts_with(reason))
                .count();
            if recorded < acked {
                findings.missing.push(format!(
                    "{id}: {acked} acknowledged {reason:?} → {state}, {recorded} in its timeline"
                ));
            }
        }
    }
    findings
}

/// Workloads not yet where the loop leaves them (pending, provisioning, stopping, deleting).
pub async fn unsettled(database: &str) -> usize {
    let url = DatabaseUrl::parse(database).unwrap();
    let store = einsora_store::open(&url).await.unwrap();
    let moving = [
        State::Pending,
        State::Provisioning,
        State::Stopping,
        State::Deleting,
    ];
    store
        .workloads(&WorkloadFilter {
            states: moving.to_vec(),
            ..WorkloadFilter::default()
        })
        .await
        .unwrap()
        .len()
}

/// The checker itself finds each kind of damage, so a clean run means something.
#[tokio::test]
async fn the_checker_finds_illegal_edges_duplicates_missing_acknowledgements_and_stale_rows() {
    use einsora_store::QuotaClass;
    use einsora_testkit::db::TestDb;
    use einsora_testkit::fixtures::{created, new_workload, tenant_as};

    let db = TestDb::sqlite().await;
    let (store, database) = (&db.store, db.url.to_string());
    let tenant = tenant_as(&**store, false, QuotaClass::Default, None).await;
    let by = created();
    let w = store
        .create_workload(&new_workload(tenant, "w"), &by)
        .await
        .unwrap();
    let id = w.id.to_string();
    let stop = Acknowledged {
        workload: id.clone(),
        state: State::Stopping,
        reason: "stop requested by",
    };
    assert!(
        check(&database, &[]).await.clean(),
        "a fresh workload is clean"
    );
    let missing = check(&database, &[stop]).await;
    assert_eq!(missing.missing.len(), 1, "{missing:?}");
    let key = format!("X'{}'", w.id.as_uuid().simple());
    let insert = |from: &str, to: &str| {
        format!(
            "INSERT INTO workload_events (workload_id, tenant_id, from_state, to_state, reason, \
             attempt, at) SELECT id, tenant_id, '{from}', '{to}', 'forged', 0, 0 \
             FROM workloads WHERE id = {key};"
        )
    };
    let sql = format!(
        "{}{}{}",
        insert("pending", "pending"),
        insert("pending", "pending"),
        insert("pending", "running")
    );
    db.execute(&sql);
    let damaged = check(&database, &[]).await;
    assert!(!damaged.illegal.is_empty(), "{damaged:?}");
    assert_eq!(damaged.duplicates.len(), 1, "{damaged:?}");
    assert_eq!(damaged.rows_differ.len(), 1, "{damaged:?}");
}
