use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::output::{OutputStream, PrintedLine};
use einsora_store::{OutputBatch, OutputCaps, OutputQuery, StoreError};
use time::{Duration, OffsetDateTime};

use crate::harness::{TestDb, tenant, workload_in};

const ROOMY: OutputCaps = OutputCaps {
    per_workload: 1 << 20,
    per_tenant: 1 << 20,
    total: 1 << 20,
};

/// `texts` as lines of a source starting at `from`, each ending after its newline.
fn lines(from: u64, texts: &[&str]) -> Vec<PrintedLine> {
    let mut end = from;
    texts
        .iter()
        .map(|t| {
            end += t.len() as u64 + 1;
            PrintedLine {
                stream: OutputStream::Stdout,
                printed_at: OffsetDateTime::UNIX_EPOCH + Duration::seconds(1),
                text: (*t).to_owned(),
                dropped_before: 0,
                gap_before: false,
                end,
            }
        })
        .collect()
}

fn batch(w: WorkloadId, t: TenantId, attempt: u32, from: u64, texts: &[&str]) -> OutputBatch {
    let lines = lines(from, texts);
    OutputBatch {
        workload_id: w,
        tenant_id: t,
        attempt,
        to: lines.last().map_or(from, |l| l.end),
        received_at: OffsetDateTime::now_utc(),
        lines,
    }
}

fn texts(page: &einsora_store::OutputPage) -> Vec<&str> {
    page.lines.iter().map(|l| l.text.as_str()).collect()
}

fn all() -> OutputQuery {
    OutputQuery {
        limit: 1000,
        ..OutputQuery::default()
    }
}

/// Lines are numbered in order; a batch shipped again (an agent that rewound to the head)
/// stores only its new lines, whatever its attempt, and one from an older attempt nothing;
/// pages read after a line, or the tail.
pub async fn output_is_kept_in_order_once_and_resumes_from_its_head(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = workload_in(store, t, State::Running).await.id;
    let empty = store.read_output(w, &all()).await.unwrap();
    assert_eq!((empty.lines.len(), empty.next_seq), (0, 1));

    let first = batch(w, t, 1, 0, &["one", "two"]);
    let head = store.append_output(&first, &ROOMY).await.unwrap();
    assert_eq!((head.attempt, head.offset, head.next_seq), (1, 8, 3));
    let again = store.append_output(&first, &ROOMY).await.unwrap();
    assert_eq!(again, head, "shipped again: stored once");
    let overlapping = batch(w, t, 1, 4, &["two", "three"]);
    let head = store.append_output(&overlapping, &ROOMY).await.unwrap();
    assert_eq!((head.offset, head.next_seq), (14, 4), "only its new line");
    // The next attempt's source goes on from the last (offsets grow across attempts): read
    // again from before the head, it stores only what is new, with what its source lost before
    // it (a count, and a gap of unknown size).
    let mut second = batch(w, t, 2, 8, &["three", "again"]);
    second.lines[1].dropped_before = 2;
    second.lines[1].gap_before = true;
    let restarted = store.append_output(&second, &ROOMY).await.unwrap();
    assert_eq!((restarted.attempt, restarted.offset), (2, 20));
    let stale = store
        .append_output(&batch(w, t, 1, 14, &["late"]), &ROOMY)
        .await
        .unwrap();
    assert_eq!(stale, restarted, "an older attempt's lines come too late");

    let page = store.read_output(w, &all()).await.unwrap();
    assert_eq!(texts(&page), ["one", "two", "three", "again"]);
    let seqs: Vec<u64> = page.lines.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(page.lines[3].attempt, 2);
    let lost: Vec<(u64, bool)> = page
        .lines
        .iter()
        .map(|l| (l.dropped_before, l.gap_before))
        .collect();
    assert_eq!(lost, [(0, false), (0, false), (0, false), (2, true)]);
    assert_eq!(page.next_seq, 5);
    let after = OutputQuery {
        after: Some(2),
        limit: 1,
        ..OutputQuery::default()
    };
    assert_eq!(
        texts(&store.read_output(w, &after).await.unwrap()),
        ["three"]
    );
    let tail = OutputQuery {
        tail: Some(2),
        limit: 1000,
        ..OutputQuery::default()
    };
    assert_eq!(
        texts(&store.read_output(w, &tail).await.unwrap()),
        ["three", "again"]
    );
    let heads = store.output_heads(&[w, WorkloadId::new()]).await.unwrap();
    assert_eq!(
        heads,
        [restarted.clone()].map(|mut h| {
            h.next_seq = 5;
            h.bytes = 16 + 4 * 64;
            h
        })
    );

    let backwards = OutputBatch {
        to: 0,
        ..batch(w, t, 2, 6, &["x"])
    };
    assert!(matches!(
        store.append_output(&backwards, &ROOMY).await,
        Err(StoreError::InvalidInput(_))
    ));
}

/// Past a cap the oldest lines go, counted as dropped: the workload's own, then its tenant's
/// oldest across its workloads, then the oldest of all; another tenant keeps its own.
pub async fn output_past_a_cap_drops_the_oldest_and_says_so(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let a = workload_in(store, t, State::Running).await.id;
    let b = workload_in(store, t, State::Running).await.id;
    let theirs = workload_in(store, other, State::Running).await.id;
    let ten = "0123456789";
    // What a line of ten bytes costs the caps: its text and a row's overhead.
    let line = 10 + 64;
    let caps = OutputCaps {
        per_workload: 3 * line,
        per_tenant: 5 * line,
        total: 1 << 20,
    };
    let earlier = OutputBatch {
        received_at: OffsetDateTime::now_utc() - Duration::seconds(10),
        ..batch(a, t, 1, 0, &[ten, ten, ten, ten])
    };
    store.append_output(&earlier, &caps).await.unwrap();
    let page = store.read_output(a, &all()).await.unwrap();
    assert_eq!(page.lines.len(), 3, "three lines' worth a workload");
    assert_eq!(page.lines[0].seq, 2);
    assert_eq!(page.dropped_lines, 1);
    store
        .append_output(&batch(b, t, 1, 0, &[ten, ten, ten]), &caps)
        .await
        .unwrap();
    let (pa, pb) = (
        store.read_output(a, &all()).await.unwrap(),
        store.read_output(b, &all()).await.unwrap(),
    );
    assert_eq!(
        pa.lines.len() + pb.lines.len(),
        5,
        "five lines' worth the tenant: {pa:?} {pb:?}"
    );
    assert_eq!(pa.lines.len(), 2, "its oldest were a's");
    assert_eq!(pa.dropped_lines, 2);
    let whole = OutputCaps {
        total: 6 * line,
        ..caps
    };
    store
        .append_output(&batch(theirs, other, 1, 0, &[ten, ten]), &whole)
        .await
        .unwrap();
    let mut kept = 0;
    for w in [a, b, theirs] {
        kept += store.read_output(w, &all()).await.unwrap().lines.len();
    }
    assert_eq!(kept, 6, "six lines' worth in all");
    let theirs_page = store.read_output(theirs, &all()).await.unwrap();
    assert_eq!(theirs_page.lines.len(), 2, "the newest are kept");

    // Empty lines cost a row's overhead: a workload printing only newlines is capped too.
    let quiet = tenant(store, None).await;
    let blank = workload_in(store, quiet, State::Running).await.id;
    let rows = OutputCaps {
        per_workload: 3 * 64,
        per_tenant: 1 << 20,
        total: 1 << 20,
    };
    store
        .append_output(&batch(blank, quiet, 1, 0, &[""; 10]), &rows)
        .await
        .unwrap();
    let page = store.read_output(blank, &all()).await.unwrap();
    assert_eq!((page.lines.len(), page.dropped_lines), (3, 7));
}

/// The sweep drops what was received before its cutoff, and counts it.
pub async fn the_retention_sweep_drops_lines_received_before_the_cutoff(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = workload_in(store, t, State::Running).await.id;
    let now = OffsetDateTime::now_utc();
    let old = OutputBatch {
        received_at: now - Duration::days(15),
        ..batch(w, t, 1, 0, &["old", "older"])
    };
    store.append_output(&old, &ROOMY).await.unwrap();
    store
        .append_output(&batch(w, t, 1, old.to, &["new"]), &ROOMY)
        .await
        .unwrap();
    let dropped = store.sweep_output(now - Duration::days(14)).await.unwrap();
    assert_eq!(dropped, 2);
    let page = store.read_output(w, &all()).await.unwrap();
    assert_eq!(texts(&page), ["new"]);
    assert_eq!(page.dropped_lines, 2);
    assert_eq!(
        store.sweep_output(now - Duration::days(14)).await.unwrap(),
        0
    );
}

/// `since` keeps only lines printed at or after it, whether reading after a line, the tail or
/// from the oldest.
pub async fn output_reads_only_what_was_printed_since(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = workload_in(store, t, State::Running).await.id;
    let mut b = batch(w, t, 1, 0, &["old", "new", "newer"]);
    for (i, line) in b.lines.iter_mut().enumerate() {
        line.printed_at = OffsetDateTime::UNIX_EPOCH + Duration::seconds(10 * i as i64);
    }
    store.append_output(&b, &ROOMY).await.unwrap();
    let since = Some(OffsetDateTime::UNIX_EPOCH + Duration::seconds(10));
    let read = |q: OutputQuery| async move { store.read_output(w, &q).await.unwrap() };
    let from_oldest = read(OutputQuery { since, ..all() }).await;
    assert_eq!(texts(&from_oldest), ["new", "newer"]);
    let tail = read(OutputQuery {
        since,
        tail: Some(3),
        ..all()
    })
    .await;
    assert_eq!(texts(&tail), ["new", "newer"]);
    let after = read(OutputQuery {
        since,
        after: Some(2),
        ..all()
    })
    .await;
    assert_eq!(texts(&after), ["newer"]);
}

/// A batch of more lines than one statement writes is kept whole, numbered in order across
/// the statements, its cost counted once per line.
pub async fn a_batch_of_many_lines_is_kept_whole_and_numbered(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = workload_in(store, t, State::Running).await.id;
    let many: Vec<String> = (0..2048).map(|i| format!("line {i}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let head = store
        .append_output(&batch(w, t, 1, 0, &refs), &ROOMY)
        .await
        .unwrap();
    assert_eq!(head.next_seq, 2049);
    let cost: u64 = many.iter().map(|l| l.len() as u64 + 64).sum();
    assert_eq!(head.bytes, cost);
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = store
            .read_output(
                w,
                &OutputQuery {
                    after: Some(after),
                    ..all()
                },
            )
            .await
            .unwrap();
        let Some(last) = page.lines.last() else { break };
        after = last.seq;
        seen.extend(page.lines.iter().map(|l| (l.seq, l.text.clone())));
    }
    let expected: Vec<(u64, String)> = many
        .into_iter()
        .enumerate()
        .map(|(i, text)| (i as u64 + 1, text))
        .collect();
    assert_eq!(seen, expected);
}
